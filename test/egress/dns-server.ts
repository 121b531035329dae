// A DNS server for the egress tests and benchmark, on 127.0.0.1 only. Each
// name maps to a function of how many times it was asked, so a test can serve
// rebinding answers (public first, private after). Answers have TTL 0 unless an entry sets one.
import dgram from 'node:dgram';
import { once } from 'node:events';
import dnsPacket from 'dns-packet';

export interface Answers {
  A?: string[];
  AAAA?: string[];
  /** answer SERVFAIL instead */
  servfail?: boolean;
  /** seconds; default 0 (never cached) */
  ttl?: number;
}

export type Zone = Record<string, Answers | ((askedBefore: number) => Answers)>;

export interface TestDnsServer {
  address: string;
  /** queries received per name, by type ("A"/"AAAA") */
  queries: (name: string, type?: 'A' | 'AAAA') => number;
  close: () => Promise<void>;
}

export async function startDnsServer(zone: Zone): Promise<TestDnsServer> {
  const socket = dgram.createSocket('udp4');
  const asked = new Map<string, number>();
  socket.on('message', (msg, rinfo) => {
    let query: dnsPacket.Packet;
    try {
      query = dnsPacket.decode(msg);
    } catch {
      return;
    }
    const q = query.questions?.[0];
    if (!q) return;
    const name = q.name.toLowerCase();
    const type = q.type === 'A' || q.type === 'AAAA' ? q.type : undefined;
    const key = `${name}/${q.type}`;
    const before = asked.get(key) ?? 0;
    asked.set(key, before + 1);
    const entry = zone[name];
    const answers = typeof entry === 'function' ? entry(before) : entry;
    const rcode = !entry ? 'NXDOMAIN' : answers?.servfail ? 'SERVFAIL' : 'NOERROR';
    const data = type && answers && !answers.servfail ? (answers[type] ?? []) : [];
    const reply = dnsPacket.encode({
      id: query.id,
      type: 'response',
      flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | (rcode === 'NXDOMAIN' ? 3 : rcode === 'SERVFAIL' ? 2 : 0),
      questions: [q],
      answers: data.map((address) => ({ type: type!, name: q.name, ttl: answers?.ttl ?? 0, class: 'IN' as const, data: address })),
    });
    socket.send(reply, rinfo.port, rinfo.address);
  });
  socket.bind(0, '127.0.0.1');
  await once(socket, 'listening');
  const { port } = socket.address();
  return {
    address: `127.0.0.1:${port}`,
    queries: (name, type) => type
      ? (asked.get(`${name}/${type}`) ?? 0)
      : (asked.get(`${name}/A`) ?? 0) + (asked.get(`${name}/AAAA`) ?? 0),
    close: () => new Promise((r) => socket.close(() => r())),
  };
}
