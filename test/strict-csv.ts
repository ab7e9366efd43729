import assert from 'node:assert/strict';

/**
 * Strict RFC 4180 (with UTF-8 text): records end in CRLF; a quoted field runs to a quote that is
 * not doubled and is followed by a comma or the end of the record; an unquoted field holds no
 * quote, CR or LF. Anything else fails the test.
 */
export function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let i = 0;
  while (i < text.length) {
    let field = '';
    if (text[i] === '"') {
      for (i += 1; ; i += 1) {
        assert.ok(i < text.length, 'a quoted field is closed');
        if (text[i] === '"' && text[i + 1] === '"') {
          field += '"';
          i += 1;
        } else if (text[i] === '"') break;
        else field += text[i];
      }
      i += 1;
    } else {
      while (i < text.length && text[i] !== ',' && text[i] !== '\r') {
        assert.ok(!'"\n'.includes(text[i] as string), `no quote or bare LF in an unquoted field at ${i}`);
        field += text[i];
        i += 1;
      }
    }
    record.push(field);
    if (text[i] === ',') {
      i += 1;
      continue;
    }
    assert.equal(text.slice(i, i + 2), '\r\n', `a field ends in a comma or CRLF at ${i}`);
    i += 2;
    records.push(record);
    record = [];
  }
  assert.deepEqual(record, [], 'the last record ends in CRLF');
  return records;
}
