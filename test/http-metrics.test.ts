import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DURATION_BUCKETS, HttpMetrics } from '../src/http-metrics.ts';

test('responses are written as one counter series per status and a cumulative histogram per route', () => {
  const metrics = new HttpMetrics();
  metrics.record('GET', '/api/v1/public/users', 200, 0.0004);
  metrics.record('GET', '/api/v1/public/users', 200, 0.003);
  metrics.record('GET', '/api/v1/public/users', 401, 7);
  metrics.record('HEAD', '/api/v1/public/users', 200, 0.001);

  const labels = 'method="GET",route="/api/v1/public/users"';
  const head = 'method="HEAD",route="/api/v1/public/users"';
  assert.equal(
    metrics.text(),
    [
      '# HELP http_requests_total HTTP responses sent, by method, route pattern and status code',
      '# TYPE http_requests_total counter',
      `http_requests_total{${labels},status_code="200"} 2`,
      `http_requests_total{${labels},status_code="401"} 1`,
      `http_requests_total{${head},status_code="200"} 1`,
      '# HELP http_request_duration_seconds Time from request to response, by route pattern',
      '# TYPE http_request_duration_seconds histogram',
      // 0.0004 ≤ 0.001; 0.003 ≤ 0.005; 7 only in +Inf.
      ...[1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3].map(
        (count, i) =>
          `http_request_duration_seconds_bucket{${labels},le="${i < DURATION_BUCKETS.length ? DURATION_BUCKETS[i] : '+Inf'}"} ${count}`,
      ),
      `http_request_duration_seconds_sum{${labels}} ${0.0004 + 0.003 + 7}`,
      `http_request_duration_seconds_count{${labels}} 3`,
      // A bound is inclusive: 0.001 is counted in le="0.001".
      ...[...DURATION_BUCKETS, '+Inf'].map(
        (bound) => `http_request_duration_seconds_bucket{${head},le="${bound}"} 1`,
      ),
      `http_request_duration_seconds_sum{${head}} 0.001`,
      `http_request_duration_seconds_count{${head}} 1`,
      '',
    ].join('\n'),
  );
});

test('label values are escaped as the text format requires', () => {
  const metrics = new HttpMetrics();
  metrics.record('GET', 'a\\b"c\nd', 404, 0.01);
  assert.match(
    metrics.text(),
    /^http_requests_total\{method="GET",route="a\\\\b\\"c\\nd",status_code="404"\} 1$/m,
  );
});

test('nothing recorded: the families are declared with no series', () => {
  assert.equal(
    new HttpMetrics().text(),
    [
      '# HELP http_requests_total HTTP responses sent, by method, route pattern and status code',
      '# TYPE http_requests_total counter',
      '# HELP http_request_duration_seconds Time from request to response, by route pattern',
      '# TYPE http_request_duration_seconds histogram',
      '',
    ].join('\n'),
  );
});
