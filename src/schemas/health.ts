import { Type } from 'typebox';
import { component } from './openapi.ts';

/** The bodies of the probes (src/routes/health.ts), as `healthService.readiness` reports. */

export const LivenessSchema = component('Liveness', Type.Object({ status: Type.Literal('ok') }));

export const ReadinessSchema = component(
  'Readiness',
  Type.Object({
    status: Type.Union([Type.Literal('ready'), Type.Literal('unavailable')]),
    database: Type.Union([Type.Literal('up'), Type.Literal('down')]),
    redis: Type.Union([Type.Literal('up'), Type.Literal('down'), Type.Literal('not configured')], {
      description: 'Reported only: without Redis, rate limits are counted per instance',
    }),
  }),
);
