import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

/**
 * The framework's floor: Fastify 5 with its pino logger at the level the bench runs the API with
 * (`warn`), and one route that sends the exact bytes and headers the bare server sends, with none
 * of the product's work (no key check, count, cache or metrics). Its CPU per request against the
 * bare server's is the share no code of the product can go above.
 */
const [bodyPath, headersJson, port, path] = process.argv.slice(2) as [string, string, string, string];
const body = readFileSync(bodyPath);
const headers = JSON.parse(headersJson) as Record<string, string>;
const app = Fastify({ logger: { level: 'warn' } });
app.get(path, (_request, reply) => {
  reply.headers(headers).send(body);
});
await app.listen({ port: Number(port), host: '127.0.0.1' });
