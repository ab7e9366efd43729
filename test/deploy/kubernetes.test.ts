import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { CONFIG_VARIABLES } from '../../src/config.ts';
import { ROOT } from '../helpers.ts';

/**
 * deploy/kubernetes, checked without a cluster: each kustomization is rendered by `kubectl
 * kustomize` (on the machine image), every object it yields is validated against the Kubernetes
 * schemas (kubernetes-models), and held to what docs/deployment.md promises.
 */

const KUBECTL = process.env.KUBECTL ?? 'kubectl';
const BASE = join(ROOT, 'deploy/kubernetes/base');
const OVERLAY = join(ROOT, 'deploy/kubernetes/overlays/postgres-redis');

// The figures the resources are sized from (docs/performance.md): the server's RSS after walking
// every page of a million incidents, exporting them and replaying the feed, at most 302 MB (at the
// export's peak, PostgreSQL); at the peak of a webhook fan-out of a million deliveries, 469 MB.
const STEADY_MB = 302;
const PEAK_MB = 469;

// Loosely typed on purpose: these are rendered manifests, checked field by field below.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type K8sObject = { apiVersion: string; kind: string; metadata: { name: string }; [field: string]: any };

function render(dir: string): K8sObject[] {
  const text = execFileSync(KUBECTL, ['kustomize', dir], { encoding: 'utf8' });
  return parseAllDocuments(text).map((doc) => doc.toJS() as K8sObject);
}

/** Validates `object` with the kubernetes-models class of its apiVersion and kind; throws if invalid. */
async function validate(object: K8sObject): Promise<void> {
  const [group, version] = object.apiVersion.includes('/')
    ? object.apiVersion.split('/')
    : [null, object.apiVersion];
  const module = (await import(`kubernetes-models/${group === null ? '' : `${group}/`}${version}`)) as Record<
    string,
    new (data: unknown) => { validate(): void }
  >;
  const Model = module[object.kind];
  assert.ok(Model !== undefined, `kubernetes-models knows ${object.apiVersion} ${object.kind}`);
  new Model(object).validate();
}

/** Bytes of a Kubernetes quantity such as 320Mi or 1Gi. */
function bytes(quantity: string): number {
  const match = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
  assert.ok(match !== null, quantity);
  const unit = new Map([
    ['Ki', 1024],
    ['Mi', 1024 ** 2],
    ['Gi', 1024 ** 3],
  ]).get(match[2] ?? '');
  return Number(match[1]) * (unit ?? 1);
}

const find = (objects: K8sObject[], kind: string, name: string) => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  assert.ok(found !== undefined, `${kind} ${name}`);
  return found;
};

/** Whether `selector` (matchLabels, or a Service's plain map) selects pods labelled `labels`. */
const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);

function drainMs(): number {
  const source = readFileSync(join(ROOT, 'src/server.ts'), 'utf8');
  const match = /const SHUTDOWN_DEADLINE_MS = ([\d_]+);/.exec(source);
  assert.ok(match !== null, 'src/server.ts names its drain deadline');
  return Number((match[1] as string).replaceAll('_', ''));
}

for (const [label, dir] of [
  ['base', BASE],
  ['overlay postgres-redis', OVERLAY],
] as const) {
  describe(`deploy/kubernetes ${label}`, () => {
    let objects: K8sObject[];

    before(() => {
      objects = render(dir);
    });

    test('renders, and every object is valid against the Kubernetes schemas', async () => {
      assert.ok(objects.length >= 5);
      for (const object of objects) await validate(object);
      // Secrets are the operator's: none is in the repository.
      assert.deepEqual(
        objects.filter((o) => o.kind === 'Secret'),
        [],
      );
    });

    test('the Deployment: 2 replicas, liveness /healthz, readiness /readyz, a startup probe, the Service and budget select it', () => {
      const deployment = find(objects, 'Deployment', 'safety-api');
      assert.equal(deployment.spec.replicas, 2);
      assert.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0);
      const pod = deployment.spec.template;
      assert.ok(selects(deployment.spec.selector.matchLabels, pod.metadata.labels));
      const [container] = pod.spec.containers;
      assert.deepEqual(container.args, ['serve']);
      const http = container.ports.find((p: { name: string }) => p.name === 'http');
      assert.equal(http.containerPort, 8080);
      assert.deepEqual(container.livenessProbe.httpGet, { path: '/healthz', port: 'http' });
      assert.deepEqual(container.readinessProbe.httpGet, { path: '/readyz', port: 'http' });
      assert.deepEqual(container.startupProbe.httpGet, { path: '/healthz', port: 'http' });
      // A readiness probe waits out /readyz's own bound (the store deadline of 2.5 s).
      assert.ok(container.readinessProbe.timeoutSeconds >= 3);

      const service = find(objects, 'Service', 'safety-api');
      assert.ok(selects(service.spec.selector, pod.metadata.labels));
      assert.equal(service.spec.ports.find((p: { name: string }) => p.name === 'http').targetPort, 'http');
      const budget = find(objects, 'PodDisruptionBudget', 'safety-api');
      assert.ok(selects(budget.spec.selector.matchLabels, pod.metadata.labels));
      assert.ok(budget.spec.minAvailable >= 1 && budget.spec.minAvailable < deployment.spec.replicas);
      // No other workload's pods carry the server's labels.
      for (const other of objects.filter((o) => o.spec?.template !== undefined && o !== deployment))
        assert.ok(
          !selects(service.spec.selector, other.spec.template.metadata.labels ?? {}),
          other.metadata.name,
        );
    });

    test('resources sized from the measured memory; grace period longer than the drain and the preStop pause', () => {
      const pod = find(objects, 'Deployment', 'safety-api').spec.template.spec;
      const { requests, limits } = pod.containers[0].resources;
      assert.ok(bytes(requests.memory) >= STEADY_MB * 1e6, `request ${requests.memory} ≥ ${STEADY_MB} MB`);
      assert.ok(bytes(limits.memory) >= PEAK_MB * 1e6, `limit ${limits.memory} ≥ ${PEAK_MB} MB`);
      assert.ok(bytes(limits.memory) >= bytes(requests.memory));
      assert.ok(requests.cpu !== undefined);
      const pause = Number(pod.containers[0].lifecycle.preStop.exec.command[1]);
      assert.deepEqual(pod.containers[0].lifecycle.preStop.exec.command, ['sleep', String(pause)]);
      assert.ok(
        pod.terminationGracePeriodSeconds * 1000 > pause * 1000 + drainMs(),
        `${pod.terminationGracePeriodSeconds} s > ${pause} s + ${drainMs()} ms`,
      );
    });

    test('every container: non-root, read-only root filesystem, no privilege escalation, all capabilities dropped', () => {
      for (const workload of objects.filter((o) => o.spec?.template !== undefined)) {
        const pod = workload.spec.template.spec;
        assert.equal(pod.securityContext.runAsNonRoot, true, workload.metadata.name);
        assert.ok(pod.securityContext.runAsUser > 0, workload.metadata.name);
        assert.equal(pod.automountServiceAccountToken, false, workload.metadata.name);
        for (const container of pod.containers) {
          const context = container.securityContext;
          assert.equal(context.allowPrivilegeEscalation, false, container.name);
          assert.deepEqual(context.capabilities.drop, ['ALL'], container.name);
          // PostgreSQL writes beside its data (sockets, temporary files): the one exception.
          if (container.name !== 'postgres')
            assert.equal(context.readOnlyRootFilesystem, true, container.name);
        }
      }
    });

    test('the migration Job runs `migrate` with the instances’ image and settings', () => {
      const deployment = find(objects, 'Deployment', 'safety-api').spec.template.spec.containers[0];
      const job = find(objects, 'Job', 'safety-api-migrate').spec.template.spec;
      const [migrate] = job.containers;
      assert.deepEqual(migrate.args, ['migrate']);
      assert.equal(migrate.image, deployment.image);
      assert.deepEqual(migrate.envFrom, deployment.envFrom);
      const databaseUrl = (c: { env?: { name: string; value?: string }[] }) =>
        c.env?.find((e) => e.name === 'DATABASE_URL')?.value;
      assert.equal(databaseUrl(migrate), databaseUrl(deployment));
      assert.notEqual(job.restartPolicy, 'Always');
      // The instances apply no migration: the Job does, applied alone first by its label
      // (docs/deployment.md, "Upgrades"); `migrate` itself ignores the setting.
      assert.equal(find(objects, 'ConfigMap', 'safety-api').data.MIGRATE_ON_START, 'false');
      const selected = objects.filter(
        (o) =>
          (o.metadata as { labels?: Record<string, string> }).labels?.['app.kubernetes.io/component'] ===
          'migrate',
      );
      assert.deepEqual(
        selected.map((o) => `${o.kind}/${o.metadata.name}`),
        ['Job/safety-api-migrate'],
      );
    });

    test('settings: a ConfigMap of variables the server reads, and a reference to the Secret safety-api', () => {
      const config = find(objects, 'ConfigMap', 'safety-api');
      const allowed = new Set<string>(CONFIG_VARIABLES);
      for (const key of Object.keys(config.data)) assert.ok(allowed.has(key), `${key} is read by the server`);
      const container = find(objects, 'Deployment', 'safety-api').spec.template.spec.containers[0];
      assert.deepEqual(container.envFrom, [
        { configMapRef: { name: 'safety-api' } },
        { secretRef: { name: 'safety-api' } },
      ]);
      // Explicit variables are the server's, or the passwords the URLs are made of ($(NAME)).
      const names = (container.env ?? []).map((e: { name: string }) => e.name) as string[];
      const referenced = new Set(
        (container.env ?? []).flatMap((e: { value?: string }) =>
          [...(e.value ?? '').matchAll(/\$\(([A-Z_]+)\)/g)].map((m) => m[1]),
        ),
      );
      for (const name of names) assert.ok(allowed.has(name) || referenced.has(name), name);
    });
  });
}

describe('deploy/kubernetes overlay postgres-redis: the stores', () => {
  let objects: K8sObject[];

  before(() => {
    objects = render(OVERLAY);
  });

  test('PostgreSQL, and a Redis primary with one replica watched by three Sentinels, that the instances reach', () => {
    const postgres = find(objects, 'StatefulSet', 'postgres');
    assert.equal(postgres.spec.replicas, 1);
    assert.equal(postgres.spec.volumeClaimTemplates.length, 1);
    const redis = find(objects, 'StatefulSet', 'redis');
    assert.equal(redis.spec.replicas, 2, 'a primary and a replica');
    const sentinels = find(objects, 'StatefulSet', 'sentinel');
    assert.equal(sentinels.spec.replicas, 3);
    for (const set of [redis, sentinels]) {
      const service = find(objects, 'Service', set.spec.serviceName);
      assert.equal(service.spec.clusterIP, 'None', 'a headless Service names each pod');
      assert.ok(selects(service.spec.selector, set.spec.template.metadata.labels));
    }
    const postgresService = find(objects, 'Service', 'postgres');
    assert.ok(selects(postgresService.spec.selector, postgres.spec.template.metadata.labels));

    const env = Object.fromEntries(
      find(objects, 'Deployment', 'safety-api').spec.template.spec.containers[0].env.map(
        (e: { name: string; value?: string }) => [e.name, e.value],
      ),
    );
    const database = new URL(env.DATABASE_URL);
    assert.equal(database.hostname, postgresService.metadata.name);
    assert.equal(Number(database.port), postgresService.spec.ports[0].port);
    const postgresEnv = Object.fromEntries(
      postgres.spec.template.spec.containers[0].env.map((e: { name: string; value?: string }) => [
        e.name,
        e.value,
      ]),
    );
    assert.equal(database.username, postgresEnv.POSTGRES_USER);
    assert.equal(database.pathname, `/${postgresEnv.POSTGRES_DB}`);
    const sentinelHosts = Array.from({ length: 3 }, (_, i) => `sentinel-${i}.sentinel:26379`).join(',');
    assert.equal(env.REDIS_URL, `redis+sentinel://:$(REDIS_PASSWORD)@${sentinelHosts}/safety`);
    const sentinelScript = readFileSync(join(OVERLAY, 'sentinel-start.sh'), 'utf8');
    assert.match(sentinelScript, /"sentinel monitor safety \$primary 6379 2"/);
  });
});

describe('deploy/kubernetes overlay postgres-redis: redis-start.sh picks its role', () => {
  let bin: string;

  before(() => {
    // Stand-ins: redis-cli answers as the Sentinels would (or not at all), redis-server prints its arguments.
    bin = mkdtempSync(join(tmpdir(), 'safety-api-redis-start-'));
    writeFileSync(
      join(bin, 'redis-cli'),
      '#!/bin/sh\n[ -n "$FAKE_PRIMARY" ] || exit 1\nprintf "%s\\n6379\\n" "$FAKE_PRIMARY"\n',
    );
    writeFileSync(join(bin, 'redis-server'), '#!/bin/sh\necho "$@"\n');
    chmodSync(join(bin, 'redis-cli'), 0o755);
    chmodSync(join(bin, 'redis-server'), 0o755);
  });
  after(() => rmSync(bin, { recursive: true, force: true }));

  const start = (hostname: string, primary: string) =>
    execFileSync('sh', [join(OVERLAY, 'redis-start.sh')], {
      encoding: 'utf8',
      env: {
        PATH: `${bin}:${process.env.PATH}`,
        HOSTNAME: hostname,
        REDIS_PASSWORD: 'pw',
        FAKE_PRIMARY: primary,
      },
    }).trim();

  test('first start (no Sentinel answers): redis-0 is the primary, redis-1 its replica', () => {
    assert.equal(
      start('redis-0', ''),
      '--requirepass pw --masterauth pw --save  --appendonly no --replica-announce-ip redis-0.redis',
    );
    assert.match(
      start('redis-1', ''),
      /--replica-announce-ip redis-1\.redis --replicaof redis-0\.redis 6379$/,
    );
  });

  test('after a failover, each follows the primary the Sentinels name, redis-0 included', () => {
    assert.match(
      start('redis-0', 'redis-1.redis'),
      /--replica-announce-ip redis-0\.redis --replicaof redis-1\.redis 6379$/,
    );
    assert.match(start('redis-1', 'redis-1.redis'), /--replica-announce-ip redis-1\.redis$/);
  });

  test('no password: it refuses to start, saying where to set it', () => {
    assert.throws(
      () =>
        execFileSync('sh', [join(OVERLAY, 'redis-start.sh')], {
          env: { PATH: process.env.PATH },
          stdio: 'pipe',
        }),
      (error: { stderr: Buffer }) => /set REDIS_PASSWORD in the Secret safety-api/.test(String(error.stderr)),
    );
  });
});
