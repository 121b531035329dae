// Relays a tunnel's client → destination direction (requests, uploads) the
// way pipe() does, pausing the client while more than UPLOAD_QUEUE_BYTES wait
// for the destination, and also counting what waits against the client's
// share of the buffer budget (buffer-budget.ts): at its share, the client is
// paused as soon as anything waits. A paused socket still reads ahead into
// its stream buffer (up to its highWaterMark plus one read), so that much is
// counted while it is paused.
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Holding } from './buffer-budget.ts';

const UPLOAD_QUEUE_BYTES = 256 * 1024;
// what one read from a socket can add (libuv's read size)
const READ_BYTES = 64 * 1024;

export function relayUpstream(client: Duplex, upstream: net.Socket, holding: Holding): void {
  const readAhead = client.readableHighWaterMark + READ_BYTES;
  let paused = false;
  const blocked = (most: number) => {
    const waiting = upstream.writableLength;
    return waiting > most || (waiting > 0 && holding.full());
  };
  client.on('data', (chunk: Buffer) => {
    holding.hold(chunk.length);
    upstream.write(chunk, () => {
      holding.free(chunk.length);
      if (paused && !blocked(UPLOAD_QUEUE_BYTES / 2)) {
        paused = false;
        holding.free(readAhead);
        client.resume();
      }
    });
    if (!paused && blocked(UPLOAD_QUEUE_BYTES)) {
      paused = true;
      holding.hold(readAhead);
      client.pause();
    }
  });
  client.once('end', () => upstream.end());
}
