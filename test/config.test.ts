import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.ts';
import { runCli } from './helpers.ts';

describe('configuration', () => {
  test('defaults', () => {
    const { port, host, baseUrl, databaseUrl, redisUrl, logLevel } = loadConfig({});
    assert.deepEqual(
      { port, host, baseUrl, databaseUrl, redisUrl, logLevel },
      {
        port: 8080,
        host: '0.0.0.0',
        baseUrl: 'http://localhost:8080',
        databaseUrl: 'sqlite:./data/safety-api.db',
        redisUrl: null,
        logLevel: 'info',
      },
    );
  });

  test('every variable is read and normalised', () => {
    const config = loadConfig({
      PORT: '9000',
      HOST: '127.0.0.1',
      BASE_URL: 'https://api.example.com/',
      DATABASE_URL: 'postgres://u@db:5432/safety',
      REDIS_URL: 'redis://cache:6379',
      LOG_LEVEL: 'warn',
    });
    assert.equal(config.port, 9000);
    assert.equal(config.baseUrl, 'https://api.example.com');
    assert.equal(config.databaseUrl, 'postgres://u@db:5432/safety');
    assert.equal(config.redisUrl, 'redis://cache:6379');
    assert.equal(config.logLevel, 'warn');
  });

  test('bad values are all reported in one message', () => {
    assert.throws(
      () =>
        loadConfig({
          PORT: '80a',
          DATABASE_URL: 'mysql://x',
          REDIS_URL: 'http://x',
          LOG_LEVEL: 'loud',
          BASE_URL: 'ftp://x',
        }),
      (error: Error) => {
        assert.ok(error instanceof ConfigError);
        assert.match(error.message, /^invalid configuration: /);
        for (const name of ['PORT', 'DATABASE_URL', 'REDIS_URL', 'LOG_LEVEL', 'BASE_URL'])
          assert.match(error.message, new RegExp(name));
        assert.equal(error.message.split('\n').length, 1);
        return true;
      },
    );
    assert.throws(
      () => loadConfig({ PORT: '70000' }),
      /PORT must be an integer from 0 to 65535 \(got "70000"\)/,
    );
    assert.throws(() => loadConfig({ DATABASE_URL: 'sqlite:' }), /needs a file path/);
  });

  test('the server refuses to start on a bad variable, with one readable line', async () => {
    const result = await runCli(['serve'], { PORT: 'eighty', DATABASE_URL: 'sqlite::memory:' });
    assert.equal(result.code, 2);
    assert.equal(result.stdout, '');
    assert.equal(
      result.stderr,
      'safety-api: invalid configuration: PORT must be an integer from 0 to 65535 (got "eighty")\n',
    );
  });
});
