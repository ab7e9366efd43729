import { html, type SafeHtml } from '../../lib/html.ts';

/** A UTC time people read at a glance, with the exact instant kept in the `datetime` attribute. */
export function dateTime(iso: string | null, whenNull = 'Never'): SafeHtml {
  if (iso === null) return html`${whenNull}`;
  return html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`;
}

/** A whole number with thousands separators, the same whatever the server's locale. */
export function count(value: number): string {
  return value.toLocaleString('en-US');
}
