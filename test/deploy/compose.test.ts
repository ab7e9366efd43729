import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.ts';
import { ROOT } from '../helpers.ts';

/**
 * compose.yaml, checked without a container runtime: parsed (the `yaml` package, with the merge
 * keys Compose understands) and held to the topology docs/deployment.md describes.
 */

interface Service {
  image?: string;
  build?: string;
  profiles?: string[];
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  restart?: string;
  stop_grace_period?: string;
  read_only?: boolean;
}

const text = readFileSync(join(ROOT, 'compose.yaml'), 'utf8');
const compose = parse(text, { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const services = compose.services;
const names = Object.keys(services);
const OUR_IMAGE = 'safety-incident-api:local';

const ours = names.filter((name) => services[name]?.image === OUR_IMAGE);
const inScale = names.filter((name) => services[name]?.profiles?.includes('scale'));
const byDefault = names.filter((name) => services[name]?.profiles === undefined);
const service = (name: string) => services[name] as Service;
/** A one-shot step (the migration): others wait for it to end, not to be healthy. */
const isJob = (name: string) =>
  names.some((other) => service(other).depends_on?.[name]?.condition === 'service_completed_successfully');
const instances = inScale.filter((name) => ours.includes(name) && !isJob(name));
const shell = (name: string) => (service(name).command ?? []).join(' ');

describe('CONFIG_VARIABLES (src/config.ts)', () => {
  test('names exactly the environment variables the one configuration loader reads', () => {
    const read = new Set<string>();
    const env = new Proxy(
      {},
      {
        get(_target, key) {
          if (typeof key === 'string') read.add(key);
          return undefined;
        },
      },
    );
    loadConfig(env);
    assert.deepEqual([...read].sort(), [...CONFIG_VARIABLES].sort());
  });
});

describe('compose.yaml', () => {
  test('every environment variable set for the server or its CLI is one the server reads', () => {
    assert.ok(ours.length >= 4, ours.join(', '));
    const allowed = new Set<string>(CONFIG_VARIABLES);
    for (const name of ours) {
      for (const variable of Object.keys(service(name).environment ?? {}))
        assert.ok(allowed.has(variable), `${name} sets ${variable}, which the server does not read`);
    }
  });

  test('every service has a health check, except the one-shot migration, which others wait to end', () => {
    for (const name of names) {
      if (isJob(name)) {
        assert.equal(service(name).restart, 'no', name);
        continue;
      }
      assert.ok((service(name).healthcheck?.test.length ?? 0) > 0, `${name} has a health check`);
    }
    for (const name of ours.filter((n) => !isJob(n)))
      assert.deepEqual(service(name).healthcheck?.test, ['CMD', 'safety-api', 'healthcheck'], name);
  });

  test('every dependency waits for health (or for the migration to have ended)', () => {
    for (const name of names) {
      for (const [dependency, { condition }] of Object.entries(service(name).depends_on ?? {})) {
        assert.ok(names.includes(dependency), `${name} depends on ${dependency}`);
        assert.equal(condition, isJob(dependency) ? 'service_completed_successfully' : 'service_healthy');
      }
    }
  });

  test('default profile: one instance on SQLite in a named volume, on `docker compose up` alone', () => {
    assert.deepEqual(byDefault, ['api']);
    const api = service('api');
    assert.equal(api.image, OUR_IMAGE);
    assert.equal(api.build, '.');
    // The image's DATABASE_URL: sqlite:/data/safety-api.db, in the volume.
    assert.equal(api.environment?.DATABASE_URL, undefined);
    assert.deepEqual(api.volumes, ['data:/data']);
    assert.ok('data' in compose.volumes);
    assert.deepEqual(api.ports, ['8080:8080']);
    // No variable is required: without .env, `docker compose up` runs (Compose interpolates every
    // service, those of inactive profiles too, and a ${VAR:?…} would stop it).
    assert.doesNotMatch(text, /\$\{[A-Z_]+:?\?/);
  });

  test('profile scale: PostgreSQL, a Redis primary with one replica and three Sentinels, two instances, a migration, a proxy', () => {
    const images = (prefix: string) => inScale.filter((name) => service(name).image?.startsWith(prefix));
    assert.deepEqual(images('postgres:'), ['postgres']);
    const redis = images('redis:');
    const sentinels = redis.filter((name) => shell(name).includes('--sentinel'));
    const replicas = redis.filter((name) => shell(name).includes('--replicaof redis-primary 6379'));
    assert.equal(sentinels.length, 3);
    assert.deepEqual(replicas, ['redis-replica']);
    assert.deepEqual(
      redis.filter((name) => !sentinels.includes(name) && !replicas.includes(name)),
      ['redis-primary'],
    );
    for (const name of sentinels)
      assert.match(
        shell(name),
        /'sentinel monitor safety redis-primary 6379 2'/,
        `${name}: a quorum of 2 of 3`,
      );

    assert.deepEqual(instances, ['api-1', 'api-2']);
    const postgres = service('postgres').environment ?? {};
    for (const name of instances) {
      const env = service(name).environment ?? {};
      const database = new URL(env.DATABASE_URL ?? '');
      assert.equal(database.protocol, 'postgres:');
      assert.equal(database.hostname, 'postgres');
      assert.equal(database.username, postgres.POSTGRES_USER);
      assert.equal(database.pathname, `/${postgres.POSTGRES_DB}`);
      assert.equal(decodeURIComponent(database.password), '${POSTGRES_PASSWORD-}');
      assert.equal(postgres.POSTGRES_PASSWORD, '${POSTGRES_PASSWORD-}');
      // redis+sentinel://:password@each Sentinel/the name they monitor the primary under.
      assert.equal(
        env.REDIS_URL,
        `redis+sentinel://:\${REDIS_PASSWORD-}@${sentinels.map((s) => `${s}:26379`).join(',')}/safety`,
      );
      assert.equal(service(name).read_only, true);
      // Above the server's 10 s drain; Docker's default is 10 s.
      assert.equal(service(name).stop_grace_period, '15s');
    }

    const jobs = inScale.filter(isJob);
    assert.deepEqual(jobs, ['migrate']);
    assert.deepEqual(service('migrate').command, ['migrate']);
    assert.equal(service('migrate').environment?.DATABASE_URL, service('api-1').environment?.DATABASE_URL);
    for (const name of instances)
      assert.equal(service(name).depends_on?.migrate?.condition, 'service_completed_successfully');
    // The migration step, with the new image, is the one place the schema changes (docs/deployment.md, "Upgrades").
    for (const name of instances) assert.equal(service(name).environment?.MIGRATE_ON_START, 'false', name);
    assert.equal(service('migrate').environment?.MIGRATE_ON_START, undefined);

    const proxies = inScale.filter((name) => (service(name).ports ?? []).length > 0);
    assert.deepEqual(proxies, ['proxy']);
    assert.deepEqual(service('proxy').ports, ['8080:8080']);
  });

  test('`--profile scale up proxy` starts every service of the profile and not the single instance', () => {
    const started = new Set<string>();
    const start = (name: string) => {
      if (started.has(name)) return;
      started.add(name);
      for (const dependency of Object.keys(service(name).depends_on ?? {})) start(dependency);
    };
    start('proxy');
    assert.deepEqual([...started].sort(), [...inScale].sort());
  });

  test('the proxy config names both instances, on the port they listen on, and checks /readyz', () => {
    const mount = service('proxy').volumes?.find((volume) => volume.endsWith(':/etc/caddy/Caddyfile:ro'));
    assert.ok(mount !== undefined);
    const caddyfile = readFileSync(join(ROOT, mount.split(':')[0] as string), 'utf8');
    const upstreams = /^\s*reverse_proxy ([^{\n]+)\{/m.exec(caddyfile)?.[1]?.trim().split(/\s+/);
    // The image listens on 8080 (its PORT), which the instances leave as it is.
    assert.deepEqual(
      upstreams,
      instances.map((name) => `${name}:8080`),
    );
    for (const name of instances) assert.equal(service(name).environment?.PORT, undefined);
    assert.match(caddyfile, /^\s*health_uri \/readyz$/m);
    assert.match(caddyfile, /^:8080 \{$/m);
  });

  test('the secrets come from a .env file that git and the image build leave out; the docs name every variable', () => {
    for (const ignore of ['.gitignore', '.dockerignore'])
      assert.ok(readFileSync(join(ROOT, ignore), 'utf8').split('\n').includes('.env'), ignore);
    const interpolated = new Set([...text.matchAll(/\$\{([A-Z_]+)[:-]/g)].map((match) => match[1] as string));
    assert.deepEqual([...interpolated].sort(), [
      'BASE_URL',
      'LOG_LEVEL',
      'POSTGRES_PASSWORD',
      'REDIS_PASSWORD',
      'WEBHOOK_SECRETS_KEY',
    ]);
    const docs = readFileSync(join(ROOT, 'docs/deployment.md'), 'utf8');
    for (const variable of interpolated) assert.match(docs, new RegExp(`\\b${variable}=`), variable);
  });
});
