import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readFileSync } from 'node:fs';
import { configurationTable, README, withTable } from '../scripts/config-table.ts';
import {
  cacheBudgets,
  ConfigError,
  DEFAULT_CACHE_MAX_MB,
  ENVIRONMENT,
  type EnvironmentVariable,
  loadConfig,
  parseRedisUrl,
} from '../src/config.ts';
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

  test('MIGRATE_ON_START: true unless false or 0; anything else stops the server with one line', async () => {
    assert.equal(loadConfig({}).migrateOnStart, true);
    assert.equal(loadConfig({ MIGRATE_ON_START: '' }).migrateOnStart, true);
    assert.equal(loadConfig({ MIGRATE_ON_START: 'true' }).migrateOnStart, true);
    assert.equal(loadConfig({ MIGRATE_ON_START: '1' }).migrateOnStart, true);
    assert.equal(loadConfig({ MIGRATE_ON_START: 'false' }).migrateOnStart, false);
    assert.equal(loadConfig({ MIGRATE_ON_START: '0' }).migrateOnStart, false);
    assert.throws(
      () => loadConfig({ MIGRATE_ON_START: 'no' }),
      /MIGRATE_ON_START must be true or false \(got "no"\)/,
    );
    const serve = await runCli(['serve'], { MIGRATE_ON_START: 'later', DATABASE_URL: 'sqlite::memory:' });
    assert.equal(serve.code, 2);
    assert.equal(
      serve.stderr,
      'safety-api: invalid configuration: MIGRATE_ON_START must be true or false (got "later")\n',
    );
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

  test('REDIS_URL: one server (redis://, rediss://) or a primary found through Sentinels (redis+sentinel://)', () => {
    const read = (raw: string) => {
      const problems: string[] = [];
      return { target: parseRedisUrl(raw, problems), problems };
    };
    for (const url of ['redis://cache:6379', 'rediss://:secret@cache:6380/2'])
      assert.deepEqual(read(url), { target: { kind: 'server', url }, problems: [] });

    const sentinelUrl = 'redis+sentinel://app:p%40ss@s1:26380,10.0.0.2,[::1]:26381/my%20primary?db=3';
    assert.equal(loadConfig({ REDIS_URL: sentinelUrl }).redisUrl, sentinelUrl);
    assert.deepEqual(read(sentinelUrl).target, {
      kind: 'sentinel',
      sentinels: [
        { host: 's1', port: 26380 },
        { host: '10.0.0.2', port: 26379 },
        { host: '::1', port: 26381 },
      ],
      name: 'my primary',
      username: 'app',
      password: 'p@ss',
      db: 3,
    });
    assert.deepEqual(read('REDIS+SENTINEL://:pw@s1/main').target, {
      kind: 'sentinel',
      sentinels: [{ host: 's1', port: 26379 }],
      name: 'main',
      username: undefined,
      password: 'pw',
      db: 0,
    });

    const form =
      'REDIS_URL must be redis+sentinel://[[username]:password@]host[:port][,host[:port]…]/master-name[?db=N]';
    const cases: [string, string][] = [
      ['redis+sentinel://s1:26379', 'the master name is missing'],
      ['redis+sentinel://s1:26379/', 'the master name is missing'],
      ['redis+sentinel:///main', 'no Sentinel address'],
      ['redis+sentinel://s1:26379,,s2/main', '"" is not a Sentinel\'s host[:port]'],
      ['redis+sentinel://s1:70000/main', '"s1:70000" is not a Sentinel\'s host[:port]'],
      ['redis+sentinel://s1:port/main', '"s1:port" is not a Sentinel\'s host[:port]'],
      ['redis+sentinel://hunter2@s1/main', 'credentials are written [username]:password@'],
      [
        'redis+sentinel://:hunter2%zz@s1/main',
        'a percent-escape in the credentials or the master name is broken',
      ],
      ['redis+sentinel://s1/main/0', 'it is not a URL of that form'],
      ['redis+sentinel://s1/main?db=two', 'db must be a database number (got "two")'],
      ['redis+sentinel://s1/main?password=hunter2', 'unknown parameter "password"'],
    ];
    for (const [bad, what] of cases) {
      assert.deepEqual(read(bad), { target: null, problems: [`${form}: ${what}`] }, bad);
      assert.throws(
        () => loadConfig({ REDIS_URL: bad }),
        (error: Error) => {
          assert.ok(error instanceof ConfigError);
          assert.equal(error.message, `invalid configuration: ${form}: ${what}`);
          assert.doesNotMatch(error.message, /hunter2/, 'the password is not repeated');
          return true;
        },
      );
    }
    assert.throws(
      () => loadConfig({ REDIS_URL: 'sentinel://s1/main' }),
      /REDIS_URL must start with redis:\/\/ or rediss:\/\/ or redis\+sentinel:\/\/ \(got "sentinel:\/\/s1\/main"\)/,
    );
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

  test('WEBHOOK_HOST_RATE: 1000 POSTs a second per destination host by default, a whole number from 1', () => {
    assert.equal(loadConfig({}).webhookHostRate, 1000);
    assert.equal(loadConfig({ WEBHOOK_HOST_RATE: '5' }).webhookHostRate, 5);
    assert.throws(
      () => loadConfig({ WEBHOOK_HOST_RATE: '0' }),
      /^ConfigError: invalid configuration: WEBHOOK_HOST_RATE must be a whole number from 1 to 100000, e\.g\. 1000 \(got "0"\)$/,
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
    const sentinels = await runCli(['serve'], {
      REDIS_URL: 'redis+sentinel://:hunter2@s1:26379,s2:26379',
      DATABASE_URL: 'sqlite::memory:',
    });
    assert.equal(sentinels.code, 2);
    assert.equal(
      sentinels.stderr,
      'safety-api: invalid configuration: REDIS_URL must be redis+sentinel://[[username]:password@]host[:port][,host[:port]…]/master-name[?db=N]: the master name is missing\n',
    );
  });
});

describe('CACHE_MAX_MB', () => {
  test('64 MiB by default; a number of MiB (fractions allowed) otherwise', () => {
    assert.equal(loadConfig({}).cacheMaxMb, DEFAULT_CACHE_MAX_MB);
    assert.equal(DEFAULT_CACHE_MAX_MB, 64);
    assert.equal(loadConfig({ CACHE_MAX_MB: '256' }).cacheMaxMb, 256);
    assert.equal(loadConfig({ CACHE_MAX_MB: '12.5' }).cacheMaxMb, 12.5);
  });

  test('a bad value is one readable line among the others', () => {
    for (const bad of ['lots', '-1', '0', '7', '1e3', '65537', '64MB']) {
      assert.throws(
        () => loadConfig({ CACHE_MAX_MB: bad }),
        (error: Error) =>
          error instanceof ConfigError &&
          error.message ===
            `invalid configuration: CACHE_MAX_MB must be a number of MiB from 8 to 65536, e.g. 64 (got "${bad}")`,
        bad,
      );
    }
  });

  test('split into a byte budget per cache, together within the total', () => {
    const budgets = cacheBudgets(64);
    const total = Object.values(budgets).reduce((sum, bytes) => sum + bytes, 0);
    assert.ok(total <= 64 * 1024 * 1024, `${total} bytes`);
    assert.ok(Object.values(budgets).every((bytes) => Number.isInteger(bytes) && bytes > 0));
    assert.equal(budgets.responseBodies, 32 * 1024 * 1024, 'the response bodies keep the 32 MiB they had');
    assert.equal(budgets.sqlitePages, 16 * 1024 * 1024);
    assert.equal(cacheBudgets(128).rankMaps, 2 * budgets.rankMaps, 'every share grows with the total');
  });
});

describe('the variables, declared once (ENVIRONMENT in src/config.ts)', () => {
  test("the README's configuration table is the one the declarations write (npm run docs:config)", () => {
    const readme = readFileSync(README, 'utf8');
    assert.equal(withTable(readme, configurationTable()), readme);
    for (const name of Object.keys(ENVIRONMENT))
      assert.match(readme, new RegExp(`\\| \`${name.replace('*', '\\*')}\` \\|`));
  });

  test('serve --help lists every variable with its default and its line', async () => {
    const { code, stdout } = await runCli(['serve', '--help'], {});
    assert.equal(code, 0);
    for (const [name, { default: fallback, doc }] of Object.entries(ENVIRONMENT)) {
      const line = `  ${name}${fallback === null ? '' : `=${fallback}`}: ${doc.replaceAll('`', '')}`;
      assert.ok(
        stdout.split('\n').some((shown) => shown.endsWith(line)),
        `${name} in:\n${stdout}`,
      );
    }
  });

  test('the loader holds numbers and ports to their declared bounds and defaults', () => {
    const defaults = loadConfig({});
    assert.equal(defaults.port, Number(ENVIRONMENT.PORT.default));
    assert.equal(defaults.webhookTimeoutMs, Number(ENVIRONMENT.WEBHOOK_TIMEOUT_MS.default));
    assert.equal(defaults.cacheMaxMb, Number(ENVIRONMENT.CACHE_MAX_MB.default));
    for (const [name, variable] of Object.entries(ENVIRONMENT)) {
      const { reading } = variable as EnvironmentVariable;
      if (reading.kind !== 'number' && reading.kind !== 'port') continue;
      const [low, high] = reading.kind === 'number' ? [reading.min, reading.max] : [reading.lowest, 65535];
      // With what a bound of its needs of the others (a lease at least twice the timeout).
      const companions: Record<string, Record<string, string>> = {
        WEBHOOK_TIMEOUT_MS: { WEBHOOK_LEASE_SECONDS: '3600' },
        WEBHOOK_LEASE_SECONDS: { WEBHOOK_TIMEOUT_MS: '100' },
      };
      const env = (value: number) => ({ [name]: String(value), ...companions[name] });
      assert.doesNotThrow(() => loadConfig(env(high)), `${name}=${high}`);
      assert.doesNotThrow(() => loadConfig(env(low)), `${name}=${low}`);
      assert.throws(
        () => loadConfig(env(high + 1)),
        new RegExp(`${name} must be .*${high}`),
        `${name}=${high + 1}`,
      );
    }
  });
});
