import { request } from 'node:http';

/**
 * The export client: one GET on 127.0.0.1 whose body is counted (bytes, lines) and dropped, in a
 * process of its own so that neither the server nor the bench's own event loop pays for reading
 * it. The Authorization header comes from the environment, not the command line (which the
 * process list shows). Prints `sending` as it sends the request (so that a load run beside it can
 * start with it, not with this process's start-up), then one JSON line: status, header
 * `X-Changes-Cursor`, bytes, lines, and the seconds from sending the request to the body's last byte.
 */
const [port, path] = process.argv.slice(2) as [string, string];
process.stdout.write('sending\n');
const started = performance.now();
request(
  {
    host: '127.0.0.1',
    port: Number(port),
    path,
    headers: { authorization: process.env.BENCH_AUTHORIZATION },
  },
  (res) => {
    let bytes = 0;
    let lines = 0;
    res.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines += 1;
    });
    res.on('end', () => {
      const seconds = (performance.now() - started) / 1000;
      const cursor = res.headers['x-changes-cursor'] ?? null;
      process.stdout.write(`${JSON.stringify({ status: res.statusCode, cursor, bytes, lines, seconds })}\n`);
    });
  },
).end();
