/**
 * What the V8 heap of a server started with `--inspect=127.0.0.1:PORT` holds, through the inspector
 * protocol: its size and use now, then the use after a full garbage collection (what is really
 * alive). Beside the RSS, this tells a leak (the live heap grows) from a heap that V8 lets grow
 * with garbage between its full collections (the live heap stays where it was).
 */

export interface HeapReading {
  /** V8's heap now: what it has reserved, and what is in use (garbage included). */
  totalMb: number;
  usedMb: number;
  /** In use right after a full collection. */
  liveMb: number;
}

const MB = 1024 * 1024;

export async function heapAfterFullGc(inspectPort: number): Promise<HeapReading> {
  const targets = (await (await fetch(`http://127.0.0.1:${inspectPort}/json/list`)).json()) as {
    webSocketDebuggerUrl: string;
  }[];
  const url = targets[0]?.webSocketDebuggerUrl;
  if (url === undefined) throw new Error(`no inspector target on port ${inspectPort}`);
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => {
    socket.addEventListener('open', resolve, { once: true });
    socket.addEventListener('error', () => reject(new Error(`cannot connect to ${url}`)), { once: true });
  });
  let lastId = 0;
  const call = (method: string) =>
    new Promise<Record<string, number>>((resolve) => {
      const id = (lastId += 1);
      const onMessage = (event: MessageEvent) => {
        const message = JSON.parse(String(event.data)) as { id?: number; result?: Record<string, number> };
        if (message.id !== id) return;
        socket.removeEventListener('message', onMessage);
        resolve(message.result ?? {});
      };
      socket.addEventListener('message', onMessage);
      socket.send(JSON.stringify({ id, method }));
    });
  try {
    const before = await call('Runtime.getHeapUsage');
    await call('HeapProfiler.collectGarbage');
    const after = await call('Runtime.getHeapUsage');
    return {
      totalMb: (before.totalSize ?? 0) / MB,
      usedMb: (before.usedSize ?? 0) / MB,
      liveMb: (after.usedSize ?? 0) / MB,
    };
  } finally {
    socket.close();
  }
}
