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

  test('MIGRATION_DATABASE_URL: PostgreSQL only, DATABASE_URL by default', () => {
    assert.equal(loadConfig({}).migrationDatabaseUrl, 'sqlite:./data/safety-api.db');
    const pooled = 'postgres://u@pgbouncer:6432/safety';
    assert.equal(loadConfig({ DATABASE_URL: pooled }).migrationDatabaseUrl, pooled);
    assert.equal(
      loadConfig({ DATABASE_URL: pooled, MIGRATION_DATABASE_URL: 'postgres://u@db:5432/safety' })
        .migrationDatabaseUrl,
      'postgres://u@db:5432/safety',
    );
    assert.throws(
      () => loadConfig({ MIGRATION_DATABASE_URL: 'postgres://u@db:5432/safety' }),
      /MIGRATION_DATABASE_URL is for PostgreSQL only: DATABASE_URL is a SQLite file/,
    );
    assert.throws(
      () => loadConfig({ DATABASE_URL: pooled, MIGRATION_DATABASE_URL: 'mysql://db/safety' }),
      /MIGRATION_DATABASE_URL must start with postgres:\/\/ or postgresql:\/\//,
    );
  });

  test('TRUST_PROXY: IPv4 and IPv6 addresses and CIDRs, comma-separated; none by default', () => {
    assert.deepEqual(loadConfig({}).trustProxy, []);
    assert.deepEqual(loadConfig({ TRUST_PROXY: ' 10.0.0.0/8, 192.168.1.10 ,::1,fd00::/8' }).trustProxy, [
      '10.0.0.0/8',
      '192.168.1.10',
      '::1',
      'fd00::/8',
    ]);
    for (const bad of [
      '10.0.0.0/33',
      'fd00::/129',
      'proxy.internal',
      '10.0.0',
      '10.0.0.1/8/1',
      '10.0.0.1,',
      '*',
    ]) {
      assert.throws(
        () => loadConfig({ TRUST_PROXY: bad }),
        (error: Error) => {
          assert.ok(error instanceof ConfigError);
          assert.match(error.message, /TRUST_PROXY must be comma-separated IP addresses or CIDRs/);
          return true;
        },
        bad,
      );
    }
    assert.throws(
      () => loadConfig({ TRUST_PROXY: '10.0.0.1,lb.internal,10.0.0.0/40' }),
      /\(not "lb\.internal", "10\.0\.0\.0\/40"\)$/,
    );
  });

  test('METRICS_PORT and METRICS_HOST: a separate listener, on loopback unless told otherwise', () => {
    assert.deepEqual((({ metricsPort, metricsHost }) => ({ metricsPort, metricsHost }))(loadConfig({})), {
      metricsPort: null,
      metricsHost: '127.0.0.1',
    });
    const config = loadConfig({ METRICS_PORT: '9100' });
    assert.equal(config.metricsPort, 9100);
    assert.equal(config.metricsHost, '127.0.0.1');
    assert.equal(loadConfig({ METRICS_PORT: '9100', METRICS_HOST: '0.0.0.0' }).metricsHost, '0.0.0.0');

    assert.throws(
      () => loadConfig({ METRICS_PORT: 'ninety' }),
      /METRICS_PORT must be an integer from 1 to 65535 \(got "ninety"\)/,
    );
    assert.throws(() => loadConfig({ METRICS_PORT: '0' }), /METRICS_PORT must be an integer from 1 to 65535/);
    assert.throws(
      () => loadConfig({ METRICS_PORT: '8080' }),
      /METRICS_PORT must differ from PORT \(both are 8080\)/,
    );
    assert.throws(
      () => loadConfig({ PORT: '9000', METRICS_PORT: '9000' }),
      /METRICS_PORT must differ from PORT/,
    );
    assert.throws(() => loadConfig({ METRICS_HOST: '0.0.0.0' }), /METRICS_HOST needs METRICS_PORT/);
  });

  test('the new variables are reported with the others, in one line', () => {
    assert.throws(
      () => loadConfig({ PORT: 'x', TRUST_PROXY: 'nope', METRICS_PORT: '99999' }),
      (error: Error) => {
        assert.match(error.message, /^invalid configuration: PORT .*; METRICS_PORT .*; TRUST_PROXY .*$/);
        assert.equal(error.message.split('\n').length, 1);
        return true;
      },
    );
  });

  test('webhooks: private addresses off, 10 s timeout, 72 h before disabling, 30 s leases, a generated secrets key by default', () => {
    const defaults = loadConfig({});
    assert.deepEqual(
      [
        defaults.webhooksAllowPrivate,
        defaults.webhookTimeoutMs,
        defaults.webhookDisableAfterHours,
        defaults.webhookLeaseSeconds,
        defaults.webhookSecretsKey,
      ],
      [false, 10_000, 72, 30, null],
    );
    const key = Buffer.alloc(32, 7);
    const set = loadConfig({
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      WEBHOOK_TIMEOUT_MS: '2500',
      WEBHOOK_DISABLE_AFTER_HOURS: '0.5',
      WEBHOOK_LEASE_SECONDS: '6',
      WEBHOOK_SECRETS_KEY: key.toString('base64'),
    });
    assert.deepEqual(
      [set.webhooksAllowPrivate, set.webhookTimeoutMs, set.webhookDisableAfterHours, set.webhookLeaseSeconds],
      [true, 2500, 0.5, 6],
    );
    assert.deepEqual(set.webhookSecretsKey, key);
    assert.throws(
      () => loadConfig({ WEBHOOK_LEASE_SECONDS: '10' }),
      /^ConfigError: invalid configuration: WEBHOOK_LEASE_SECONDS must be at least twice WEBHOOK_TIMEOUT_MS \(10 s against 10000 ms\)$/,
    );
    assert.throws(
      () =>
        loadConfig({
          WEBHOOKS_ALLOW_PRIVATE: 'yes',
          WEBHOOK_TIMEOUT_MS: '0',
          WEBHOOK_DISABLE_AFTER_HOURS: '-1',
          WEBHOOK_LEASE_SECONDS: 'soon',
          WEBHOOK_SECRETS_KEY: 'c2hvcnQ=',
        }),
      (error: Error) => {
        assert.equal(
          error.message,
          'invalid configuration: WEBHOOKS_ALLOW_PRIVATE must be true or false (got "yes"); ' +
            'WEBHOOK_TIMEOUT_MS must be a number of milliseconds from 100 to 60000, e.g. 10000 (got "0"); ' +
            'WEBHOOK_DISABLE_AFTER_HOURS must be a number of hours from 0.0001 to 8760, e.g. 72 (got "-1"); ' +
            'WEBHOOK_LEASE_SECONDS must be a number of seconds from 1 to 3600, e.g. 30 (got "soon"); ' +
            'WEBHOOK_SECRETS_KEY must be 32 bytes in base64, e.g. the output of "openssl rand -base64 32"',
        );
        return true;
      },
    );
  });

  test('the server refuses to start on a bad variable, with one readable line', async () => {
    const result = await runCli(['serve'], { PORT: 'eighty', DATABASE_URL: 'sqlite::memory:' });
    assert.equal(result.code, 2);
    assert.equal(result.stdout, '');
    assert.equal(
      result.stderr,
      'safety-api: invalid configuration: PORT must be an integer from 0 to 65535 (got "eighty")\n',
    );
    const proxies = await runCli(['serve'], { TRUST_PROXY: '10.0.0.0/99', DATABASE_URL: 'sqlite::memory:' });
    assert.equal(proxies.code, 2);
    assert.equal(
      proxies.stderr,
      'safety-api: invalid configuration: TRUST_PROXY must be comma-separated IP addresses or CIDRs, e.g. 10.0.0.0/8,::1 (not "10.0.0.0/99")\n',
    );
  });
});
