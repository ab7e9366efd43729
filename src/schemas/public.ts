import { type Static, type TSchema, Type } from 'typebox';
import type { IncidentRow } from '../db/repositories/incidents.ts';
import { ERROR_CODES } from '../errors.ts';
import { component, documentedAs } from './openapi.ts';

/**
 * Response shapes of the public API, exactly as the contract names them. Fastify serializes every
 * response through these, so a field that is not here never leaves the server.
 */

/**
 * One query-string parameter as Fastify's parser hands it over: a string, or an array of them when
 * the name is repeated. It admits every value the parser can produce, so validation never refuses
 * a request: the route normalizes it as the contract says (the public lists fall back to defaults,
 * never a 400; the wider API's 400 names the parameter). The document shows `documented`: the
 * type, default and limits a client should send.
 */
export const queryParameter = (documented: TSchema, description: string) =>
  documentedAs(
    Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description })),
    documented,
  );

const nullable = <T extends ReturnType<typeof Type.String> | ReturnType<typeof Type.Integer>>(schema: T) =>
  Type.Union([schema, Type.Null()]);

/** Workflow statuses seen in data. The contract fixes none, so the document lists them without refusing others. */
const OBSERVED_STATUSES = ['open', 'under_investigation', 'action_required', 'resolved', 'closed'];

export const INCIDENT_EXAMPLE = {
  id: '3f1c2a8e-5b7d-4e9f-a1c3-2d4e6f8a0b1c',
  incident_number: 'INC-2025-142',
  description: 'Slip on wet floor near the loading bay',
  status: 'under_investigation',
  severity_score: 6,
  severity_likelihood: 2,
  severity_impact: 3,
  location: 'Warehouse North',
  incident_date: '2025-11-03',
  created_at: '2025-11-03T09:41:12.000Z',
  updated_at: '2025-11-04T14:05:00.000Z',
};

export const IncidentSchema = component(
  'Incident',
  Type.Object(
    {
      id: Type.String({ format: 'uuid' }),
      incident_number: Type.String({ description: 'Human-readable reference, `INC-<year>-<sequence>`' }),
      description: nullable(Type.String()),
      status: Type.String({
        description: `Workflow status. Values seen in data: ${OBSERVED_STATUSES.join(', ')}; the contract fixes none, so others may appear.`,
        examples: OBSERVED_STATUSES,
      }),
      severity_score: nullable(Type.Integer({ description: 'severity_likelihood × severity_impact' })),
      severity_likelihood: nullable(Type.Integer()),
      severity_impact: nullable(Type.Integer()),
      location: nullable(Type.String({ description: 'Location name' })),
      incident_date: nullable(Type.String({ format: 'date' })),
      created_at: Type.String({ format: 'date-time' }),
      updated_at: Type.String({ format: 'date-time' }),
    },
    { examples: [INCIDENT_EXAMPLE] },
  ),
);
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

export const USER_EXAMPLE = {
  id: '8d2e4f60-1a3b-4c5d-9e7f-0a1b2c3d4e5f',
  name: 'Amara Okafor',
  email: 'amara.okafor@example.com',
  role: 'manager',
  department: 'Operations',
  job_title: 'Shift Supervisor',
  created_at: '2024-03-18T08:00:00.000Z',
};

export const UserSchema = component(
  'User',
  Type.Object(
    {
      id: Type.String({ format: 'uuid' }),
      name: Type.String(),
      email: Type.String({ format: 'email' }),
      role: Type.String({
        description: 'Role within the service: super_admin, admin, manager or employee.',
        examples: ['super_admin', 'admin', 'manager', 'employee'],
      }),
      department: nullable(Type.String({ description: 'Department name' })),
      job_title: nullable(Type.String()),
      created_at: Type.String({ format: 'date-time' }),
    },
    { examples: [USER_EXAMPLE] },
  ),
);

export const DEPARTMENT_EXAMPLE = {
  id: '1b6a0c3d-7e2f-4a8b-b9c0-d1e2f3a4b5c6',
  name: 'Operations',
  created_at: '2024-01-08T10:00:00.000Z',
};

export const LOCATION_EXAMPLE = {
  id: '5c7d9e1f-2a4b-4c6d-8e0f-a1b2c3d4e5f6',
  name: 'Warehouse North',
  created_at: '2024-01-08T10:00:00.000Z',
};

/** Departments and locations have the same fields, and each its own name in the document. */
const namedResource = (name: string, example: typeof DEPARTMENT_EXAMPLE) =>
  component(
    name,
    Type.Object(
      {
        id: Type.String({ format: 'uuid' }),
        name: Type.String(),
        created_at: Type.String({ format: 'date-time' }),
      },
      { examples: [example] },
    ),
  );

export const DepartmentSchema = namedResource('Department', DEPARTMENT_EXAMPLE);
export const LocationSchema = namedResource('Location', LOCATION_EXAMPLE);

export const IncidentPaginationSchema = component(
  'IncidentPagination',
  Type.Object({
    page: Type.Integer({ minimum: 1, description: 'Current page number' }),
    limit: Type.Integer({ minimum: 1, maximum: 200, description: 'Page size in effect' }),
    total: Type.Integer({ minimum: 0, description: 'Total incidents in the account' }),
    pages: Type.Integer({ minimum: 0, description: 'Total pages at this limit' }),
  }),
);

export const success = <T extends Parameters<typeof Type.Object>[0][string]>(data: T) =>
  Type.Object({ error: Type.Literal(false), data });

/** 404, 405, 500, 503, and the wider API's 400 and 401: no code, `error` is `true`. */
export const ErrorSchema = component(
  'Error',
  Type.Object({ error: Type.Literal(true), message: Type.String() }),
);

/** 401, 403 and 429 of the public API, and every error a client must tell apart: `error` is its code. */
export const CodedErrorSchema = component(
  'CodedError',
  Type.Object({
    error: Type.Enum(Object.keys(ERROR_CODES), {
      type: 'string',
      description: 'The error code: what a client checks (the Errors guide says when each is answered)',
    }),
    message: Type.String({ description: 'A sentence for people; the code is what a client checks' }),
  }),
);

/** Each table of `directoryService.listNamedResources`, with its schema and an example record. */
export const NAMED_RESOURCES = {
  departments: { schema: DepartmentSchema, example: DEPARTMENT_EXAMPLE },
  locations: { schema: LocationSchema, example: LOCATION_EXAMPLE },
};

/** A change of the changes feed whose record, while it is in the public view, looks like `object`. */
const changeOf = <
  K extends string,
  T extends typeof IncidentSchema | typeof UserSchema | typeof DepartmentSchema | typeof LocationSchema,
>(
  name: string,
  type: K,
  object: T,
) =>
  component(
    name,
    Type.Object({
      seq: Type.Integer({ minimum: 1, description: "The change's place in the account's feed, ascending" }),
      type: Type.Literal(type),
      op: Type.Union([Type.Literal('upsert'), Type.Literal('delete')], {
        description:
          '`upsert`: the record as it now is; `delete`: it left the public view (deleted, inactive, vendor support) and `object` is null',
      }),
      id: Type.String({ format: 'uuid' }),
      object: Type.Union([object, Type.Null()], {
        description: 'As the list endpoint shows it; null for a delete',
      }),
      changed_at: Type.String({ format: 'date-time', description: 'When the change was written' }),
    }),
  );

export const ChangeSchema = Type.Union([
  changeOf('IncidentChange', 'incident', IncidentSchema),
  changeOf('UserChange', 'user', UserSchema),
  changeOf('DepartmentChange', 'department', DepartmentSchema),
  changeOf('LocationChange', 'location', LocationSchema),
]);
export type Change = Static<typeof ChangeSchema>;

export const ChangesPageSchema = component(
  'ChangesPage',
  Type.Object({
    data: Type.Array(ChangeSchema, { description: 'Oldest change first, each record at most once' }),
    next_cursor: Type.String({ description: 'Opaque: send it as `cursor` to continue after this page' }),
    has_more: Type.Boolean({
      description: 'Whether changes exist after `next_cursor` now; false: poll again later with it',
    }),
  }),
);
