import pino from 'pino';
import { buildApp } from './app.ts';
import { type Config, loadConfig } from './config.ts';
import { openServices } from './services/index.ts';

/** Starts the server and stops it cleanly on SIGINT/SIGTERM. The process belongs to this file. */
export async function serve(config: Config = loadConfig()): Promise<void> {
  const logger = pino({ level: config.logLevel });
  const services = await openServices(config, logger);
  const app = await buildApp(config, services);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    await app.close();
    await services.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));

  await app.listen({ port: config.port, host: config.host });
}
