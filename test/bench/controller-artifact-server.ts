// The benchmark's HTTPS artifact server in its own process, so the server's
// TLS work does not share an event loop with the client being measured.
// Prints one JSON line {url, sha256, size, caFile, statsUrl} once listening.
import { startArtifactServer, blob } from '../controller/artifact-server.ts';

const size = Number(process.argv[2] ?? 256 * 1024 * 1024);
const server = await startArtifactServer();
const b = blob(size);
server.put('/object.bin', b.data);
const port = (server.server.address() as { port: number }).port;
console.log(JSON.stringify({ url: server.url('/object.bin'), sha256: b.sha256, size, caFile: server.caFile, statsUrl: `https://127.0.0.1:${port}/__stats` }));
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
