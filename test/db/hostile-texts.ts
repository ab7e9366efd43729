/**
 * Every character COPY's text format or JSON treats specially, text around them, and text that
 * looks like an escape or COPY's NULL: what the COPY tests (copy-ndjson, copy-text) send through
 * PostgreSQL.
 */
export function hostileTexts(): (string | null)[] {
  const singles = Array.from({ length: 0x7f }, (_, i) => String.fromCharCode(i + 1));
  return [
    ...singles,
    ...singles.map((c) => `a${c}b${c}${c}`),
    '',
    null,
    '\\N',
    'N',
    '\\.',
    '\\',
    '\\\\',
    '\\t and \\n written out',
    '"quoted"',
    'tab\there\r\nand a line\rand a CR',
    'line separator \u2028 and paragraph separator \u2029',
    'é, 中文, 😀, \u{10ffff}',
    '\u007f\u0080\u009f',
    `${'long text, '.repeat(2000)}end`,
  ];
}
