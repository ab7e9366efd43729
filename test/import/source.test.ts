import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { validateRecord } from '../../src/import/validation.ts';
import { type PlacedRecord, packChunk, unpackChunk } from '../../src/import/source.ts';

test('a chunk of mixed record types survives packing for the worker message unchanged', () => {
  const now = '2026-01-01T00:00:00.000Z';
  const accountId = randomUUID();
  const place = (where: string, type: Parameters<typeof validateRecord>[0], value: object): PlacedRecord => ({
    where,
    record: validateRecord(type, value, where, now),
  });
  const records = [
    place('line 1', 'account', { id: accountId, name: 'Acme' }),
    place('line 2', 'incident', {
      id: randomUUID(),
      account_id: accountId,
      incident_number: 'INC-2025-1',
      status: 'open',
      description: null,
      created_at: '2025-01-01T00:00:00Z',
    }),
    place('line 3', 'user', {
      id: randomUUID(),
      account_id: accountId,
      name: 'Ann',
      email: 'ann@example.com',
      role: 'employee',
      vendor_support: true,
    }),
    place('line 4', 'incident', {
      id: randomUUID(),
      account_id: accountId,
      incident_number: 'INC-2025-2',
      status: 'closed',
      severity_impact: 3,
      incident_date: '2025-01-02',
      created_at: '2025-01-02T00:00:00.000Z',
    }),
    place('line 5', 'incident', { id: randomUUID(), account_id: accountId, deleted: true }),
    place('line 6', 'user', { id: randomUUID(), account_id: accountId, deleted: true, name: 'ignored' }),
  ];
  const packed = packChunk(records);
  // The message is flat: one value per field, the field names once per kind of record (a type,
  // or a deletion of a type: RECORD_TYPES.length further).
  assert.deepEqual(
    Object.entries(packed.fields)
      .map(([kind, fields]) => `${kind}:${fields.join(',')}`)
      .filter((entry) => entry.startsWith('8:') || entry.startsWith('9:')),
    ['8:id,account_id', '9:id,account_id'],
  );
  assert.deepEqual(Object.keys(packed.fields).sort(), ['0', '3', '4', '8', '9']);
  assert.ok(packed.values.every((value) => value === null || typeof value !== 'object'));
  assert.deepEqual(unpackChunk(structuredClone(packed)), records);
  assert.deepEqual(unpackChunk(packChunk([])), []);
});
