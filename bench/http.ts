import { Agent, request } from 'node:http';

/** One kept-alive connection: the single-connection measurements (depth, walk) use it. */
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

export interface Response {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  ms: number;
}

/** One GET on 127.0.0.1; returns status, headers, body and latency in ms. */
export function get(port: number, path: string, headers: Record<string, string> = {}): Promise<Response> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request({ host: '127.0.0.1', port, path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers as Record<string, string>,
          body: Buffer.concat(chunks),
          ms: performance.now() - started,
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

export function closeConnections(): void {
  agent.destroy();
}
