// The test DNS server (test/egress/dns-server.ts) for a container that
// resolves the way a pod does, through /etc/resolv.conf, which names a server
// but no port: run inside a network namespace as root,
//   ip netns exec <ns> node test/image/netns-dns.ts '<zone as JSON>'
// it serves the zone on 127.0.0.1:53 of that namespace (relayed to the test
// server's own port), prints {"ready":true} when it listens, then one JSON line
// per query it relays: {"query":"<name>","type":"A"}.
import dgram from 'node:dgram';
import { once } from 'node:events';
import dnsPacket from 'dns-packet';
import { startDnsServer, type Zone } from '../egress/dns-server.ts';

const zone = JSON.parse(process.argv[2] ?? '{}') as Zone;
const server = await startDnsServer(zone);
const [serverHost, serverPort] = server.address.split(':') as [string, string];

const front = dgram.createSocket('udp4');
front.on('message', (msg, client) => {
  try {
    const q = dnsPacket.decode(msg).questions?.[0];
    if (q) console.log(JSON.stringify({ query: q.name.toLowerCase(), type: q.type }));
  } catch {
    // not DNS: relay it anyway, the server ignores it
  }
  // one socket per query, so each answer goes back to the client that asked
  const back = dgram.createSocket('udp4');
  const timer = setTimeout(() => back.close(), 5_000);
  back.on('message', (answer) => {
    clearTimeout(timer);
    front.send(answer, client.port, client.address, () => back.close());
  });
  back.send(msg, Number(serverPort), serverHost);
});
front.bind(53, '127.0.0.1');
await once(front, 'listening');
console.log(JSON.stringify({ ready: true }));
