// The health and metrics endpoints, each on its own port so the proxy port
// serves nothing but proxying.
import http from 'node:http';
import type { Registry } from 'prom-client';

export function createHealthServer(isReady: () => boolean): http.Server {
  return http.createServer((req, res) => {
    if (req.url === '/healthz') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    if (req.url === '/readyz') {
      const ready = isReady();
      return void res.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' }).end(ready ? 'ready\n' : 'not ready: starting or draining\n');
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /healthz or /readyz\n');
  });
}

export function createMetricsServer(registry: Registry): http.Server {
  return http.createServer((req, res) => {
    if (req.url !== '/metrics') return void res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics\n');
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${err.message}\n`),
    );
  });
}
