import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { csvRows } from '../../packages/sdk/src/export-stream.ts';
import { ExportStream } from '../../packages/sdk/src/index.ts';

/** How an export's body becomes rows: chunk boundaries anywhere, rows as soon as they arrive. */

const META = { cursor: 'c', rateLimit: null, requestId: null };
const bytes = (text: string) => new TextEncoder().encode(text);

/** A body that sends `chunks`, then waits for `release` before it ends (or fails). */
function body(chunks: Uint8Array[], release: Promise<'end' | 'fail'> = Promise.resolve('end')) {
  let cancelled = false;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      void release.then((how) => {
        if (cancelled) return;
        if (how === 'end') controller.close();
        else controller.error(new TypeError('terminated'));
      });
    },
    cancel() {
      cancelled = true;
    },
  });
  return { stream, cancelled: () => cancelled };
}

async function rows(stream: AsyncIterable<unknown>): Promise<unknown[]> {
  const found: unknown[] = [];
  for await (const row of stream) found.push(row);
  return found;
}

describe('ExportStream', () => {
  test('rows split anywhere across chunks, inside a character too', async () => {
    const text = '{"name":"Åsa – 東京 🚧"}\n{"name":"b"}\n';
    const all = bytes(text);
    // Every split point: inside the multi-byte characters, on the LF, at the ends.
    for (let at = 0; at <= all.length; at += 1) {
      const { stream } = body([all.slice(0, at), all.slice(at)]);
      assert.deepEqual(await rows(new ExportStream(stream, META)), [
        { name: 'Åsa – 東京 🚧' },
        { name: 'b' },
      ]);
    }
  });

  test('a row is handed over as soon as its line is complete, before the body ends', async () => {
    let end!: (how: 'end') => void;
    const { stream } = body(
      [bytes('{"n":1}\n{"n"')],
      new Promise((resolve) => {
        end = resolve;
      }),
    );
    const iterator = new ExportStream(stream, META)[Symbol.asyncIterator]();
    assert.deepEqual(await iterator.next(), { done: false, value: { n: 1 } });
    end('end');
    await assert.rejects(iterator.next(), /cut short/);
  });

  test('read once: a second loop over the same export throws instead of yielding nothing', async () => {
    const exported = new ExportStream(body([bytes('{"n":1}\n')]).stream, META);
    assert.deepEqual(await rows(exported), [{ n: 1 }]);
    await assert.rejects(rows(exported), /this export was read already: an export is read once/);
  });

  test('a transfer that fails mid-body throws', async () => {
    const { stream } = body([bytes('{"n":1}\n')], Promise.resolve('fail'));
    await assert.rejects(rows(new ExportStream(stream, META)), /terminated/);
  });

  test('leaving early, or cancelling while or before reading, cancels the body', async () => {
    const never = new Promise<'end'>(() => {});
    const early = body([bytes('{"n":1}\n{"n":2}\n')], never);
    for await (const row of new ExportStream(early.stream, META)) {
      assert.deepEqual(row, { n: 1 });
      break;
    }
    assert.equal(early.cancelled(), true);

    const started = body([bytes('{"n":1}\n{"n":2}\n')], never);
    const reading = new ExportStream(started.stream, META);
    assert.deepEqual(await reading[Symbol.asyncIterator]().next(), { done: false, value: { n: 1 } });
    await reading.cancel();
    assert.equal(started.cancelled(), true);

    const unread = body([], never);
    await new ExportStream(unread.stream, META).cancel();
    assert.equal(unread.cancelled(), true);
  });

  test('CSV rows split anywhere across chunks: quoted commas, quotes and line breaks, characters', async () => {
    const text =
      'id,description,location\r\n' +
      '1,"Spill, ""wet"" floor\r\nnear Dock 3",Dock 3\r\n' +
      "2,'=1+1,\r\n" +
      '3,"",Åsa – 東京 🚧\r\n';
    const expected = [
      { id: '1', description: 'Spill, "wet" floor\r\nnear Dock 3', location: 'Dock 3' },
      { id: '2', description: "'=1+1", location: '' },
      { id: '3', description: '', location: 'Åsa – 東京 🚧' },
    ];
    const all = bytes(text);
    for (let at = 0; at <= all.length; at += 1) {
      const { stream } = body([all.slice(0, at), all.slice(at)]);
      assert.deepEqual(await rows(new ExportStream(stream, META, csvRows)), expected, `split at ${at}`);
    }
    // One byte a chunk: every state of the parser meets the end of a chunk.
    const { stream } = body([...all].map((byte) => Uint8Array.of(byte)));
    assert.deepEqual(await rows(new ExportStream(stream, META, csvRows)), expected);
    // The header alone: an empty set.
    assert.deepEqual(await rows(new ExportStream(body([bytes('id,name\r\n')]).stream, META, csvRows)), []);
  });

  test('a CSV export cut short, or with a row that does not fit its header, throws', async () => {
    for (const text of ['id,name\r\n1,Ann\r\n2,Bo', 'id,name\r\n1,"Ann\r\n', 'id,name\r\n1,"Ann"'])
      await assert.rejects(
        rows(new ExportStream(body([bytes(text)]).stream, META, csvRows)),
        /cut short/,
        text,
      );
    await assert.rejects(
      rows(new ExportStream(body([bytes('id,name\r\n1,Ann,extra\r\n')]).stream, META, csvRows)),
      /a row of the CSV export has 3 fields, its header 2/,
    );
  });

  test('body: the bytes as they came; then iterating throws, and taking it once iterating does', async () => {
    const text = '{"n":1}\n{"n":2}\n';
    const taken = new ExportStream(body([bytes(text)]).stream, META);
    const chunks: Uint8Array[] = [];
    for await (const chunk of taken.body) chunks.push(chunk);
    assert.equal(Buffer.concat(chunks).toString(), text);
    assert.throws(
      () => taken[Symbol.asyncIterator](),
      /this export is read as bytes \(its body was taken\): export again/,
    );

    const iterated = new ExportStream(body([bytes(text)]).stream, META);
    const iterator = iterated[Symbol.asyncIterator]();
    assert.deepEqual(await iterator.next(), { done: false, value: { n: 1 } });
    assert.throws(() => iterated.body, /this export is being read as rows: its body is no longer whole/);
  });
});
