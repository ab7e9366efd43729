import { IsInteger, IsNumber, IsUnion, type TObject, type TSchema } from 'typebox';
import { IncidentSchema } from './public.ts';

/** A field of a record as JSON: its name and whether its value is a string or a number. */
interface JsonFieldOf {
  name: string;
  kind: 'string' | 'number';
}

/** Whether the field is a number (a nullable one is the union of its type and null). */
const isNumber = (schema: TSchema): boolean =>
  (IsUnion(schema) ? schema.anyOf : [schema]).some((type) => IsInteger(type) || IsNumber(type));

/**
 * The fields of a response schema's object, in its order: the order the list endpoints write
 * them in, which the readers that write JSON without an object (an export's copy, a page of the
 * changes feed) follow.
 */
const jsonFieldsOf = (schema: TObject): JsonFieldOf[] =>
  Object.entries(schema.properties).map(([name, type]) => ({
    name,
    kind: isNumber(type) ? 'number' : 'string',
  }));

/** An incident's fields as the list writes them: what an export's copy and a feed page's COPY write. */
export const INCIDENT_FIELDS = jsonFieldsOf(IncidentSchema);
