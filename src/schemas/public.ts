import { type Static, Type } from 'typebox';
import type { IncidentRow } from '../db/repositories/incidents.ts';

/**
 * Response shapes of the public API, exactly as the contract names them. Fastify serializes every
 * response through these, so a field that is not here never leaves the server.
 */

/**
 * One query-string parameter as Fastify's parser hands it over: a string, or an array of them when
 * the name is repeated. It admits every value the parser can produce, so validation never refuses
 * a request: the schema types the parameter, and the route normalizes it as the contract says (the
 * public lists fall back to defaults, never a 400; the wider API's 400 names the parameter).
 */
export const queryParameter = (description: string) =>
  Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description }));

const nullable = <T extends ReturnType<typeof Type.String> | ReturnType<typeof Type.Integer>>(schema: T) =>
  Type.Union([schema, Type.Null()]);

export const IncidentSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  incident_number: Type.String({ description: 'INC-<year>-<sequence>' }),
  description: nullable(Type.String()),
  status: Type.String(),
  severity_score: nullable(Type.Integer({ description: 'severity_likelihood × severity_impact' })),
  severity_likelihood: nullable(Type.Integer()),
  severity_impact: nullable(Type.Integer()),
  location: nullable(Type.String()),
  incident_date: nullable(Type.String({ format: 'date' })),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
});
export type Incident = Static<typeof IncidentSchema>;

/** An incident as both APIs show it: the stored row, with the severity score computed. */
export function toIncident(row: IncidentRow): Incident {
  const { severity_likelihood: likelihood, severity_impact: impact } = row;
  return {
    id: row.id,
    incident_number: row.incident_number,
    description: row.description,
    status: row.status,
    severity_score: likelihood === null || impact === null ? null : likelihood * impact,
    severity_likelihood: likelihood,
    severity_impact: impact,
    location: row.location,
    incident_date: row.incident_date,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export const UserSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  email: Type.String({ format: 'email' }),
  role: Type.String(),
  department: nullable(Type.String()),
  job_title: nullable(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
});

/** Departments and locations have the same fields. */
export const NamedResourceSchema = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
});

export const IncidentPaginationSchema = Type.Object({
  page: Type.Integer(),
  limit: Type.Integer(),
  total: Type.Integer(),
  pages: Type.Integer(),
});

export const success = <T extends Parameters<typeof Type.Object>[0][string]>(data: T) =>
  Type.Object({ error: Type.Literal(false), data });

export const ErrorSchema = Type.Object({
  error: Type.Union([Type.String(), Type.Literal(true)]),
  message: Type.String(),
});

/** The error statuses every public route can answer. */
export const publicErrorResponses = {
  401: ErrorSchema,
  403: ErrorSchema,
  429: ErrorSchema,
  500: ErrorSchema,
};

/** A change of the changes feed whose record, while it is in the public view, looks like `object`. */
const changeOf = <
  K extends string,
  T extends typeof IncidentSchema | typeof UserSchema | typeof NamedResourceSchema,
>(
  type: K,
  object: T,
) =>
  Type.Object({
    seq: Type.Integer({ description: "The change's place in the account's feed, ascending" }),
    type: Type.Literal(type),
    op: Type.Union([Type.Literal('upsert'), Type.Literal('delete')], {
      description: '`upsert`: the record as it now is; `delete`: it left the public view (`object` is null)',
    }),
    id: Type.String({ format: 'uuid' }),
    object: Type.Union([object, Type.Null()], {
      description: 'As the list endpoint shows it; null for a delete',
    }),
    changed_at: Type.String({ format: 'date-time' }),
  });

export const ChangeSchema = Type.Union([
  changeOf('incident', IncidentSchema),
  changeOf('user', UserSchema),
  changeOf('department', NamedResourceSchema),
  changeOf('location', NamedResourceSchema),
]);
export type Change = Static<typeof ChangeSchema>;

export const ChangesPageSchema = Type.Object({
  data: Type.Array(ChangeSchema),
  next_cursor: Type.String({ description: 'Opaque: send it as `cursor` to continue after this page' }),
  has_more: Type.Boolean({ description: 'Whether changes exist after `next_cursor` (more pages now)' }),
});
export type ChangesPage = Static<typeof ChangesPageSchema>;
