import type { Api } from '../api.ts';
import { get } from '../http.ts';
import { addRow, fmt, log } from '../report.ts';

/** Reads every incident with limit=200, in order, on one connection: all of them, and how fast. */
export async function walk(label: string, api: Api, incidents: number): Promise<void> {
  log(`${label}: walking every incident with limit=200`);
  const started = performance.now();
  let seen = 0;
  for (let page = 1; ; page += 1) {
    const res = await get(api.port, `/api/v1/public/incidents?page=${page}&limit=200`, api.auth);
    if (res.status !== 200) throw new Error(`page ${page} of the walk answered ${res.status}`);
    const body = JSON.parse(res.body.toString('utf8'));
    if (body.data.data.length === 0) break;
    seen += body.data.data.length;
  }
  const seconds = (performance.now() - started) / 1000;
  addRow({
    measurement: `${label}: walk all incidents, limit=200, one connection, in order`,
    result: `${fmt(seen)} rows in ${fmt(seconds, 1)} s = ${fmt(seen / seconds)} rows/s`,
    target: `all ${fmt(incidents)} rows`,
    pass: seen === incidents,
  });
}
