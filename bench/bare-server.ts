import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

/**
 * The yardstick: a bare node:http server that answers every request with the exact bytes and
 * headers the real server sent for the same page. Whatever the service spends beyond this is the
 * cost of the product (routing, key check, rate limit, cache lookup).
 */
const [bodyPath, headersJson, port] = process.argv.slice(2) as [string, string, string];
const body = readFileSync(bodyPath);
const headers = JSON.parse(headersJson) as Record<string, string>;
createServer((_req, res) => {
  res.writeHead(200, { ...headers, 'content-length': body.length });
  res.end(body);
}).listen(Number(port), '127.0.0.1', () => process.stdout.write('ready\n'));
