import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';

/**
 * A DNS server for the resolver tests that reads every query and never answers: a name server that
 * hangs. It records the names asked, so that a test can wait until lookups are really in flight.
 */
export class SilentDns {
  /** Every name asked so far, with how many queries for it arrived. */
  readonly asked = new Map<string, number>();
  /** When each name was first asked (`performance.now()`). */
  readonly firstAskedAt = new Map<string, number>();
  private readonly socket: Socket;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('message', (packet) => {
      const name = questionName(packet);
      if (name === null) return;
      this.asked.set(name, (this.asked.get(name) ?? 0) + 1);
      if (!this.firstAskedAt.has(name)) this.firstAskedAt.set(name, performance.now());
    });
  }

  static async start(): Promise<SilentDns> {
    const socket = createSocket('udp4');
    socket.bind(0, '127.0.0.1');
    await once(socket, 'listening');
    return new SilentDns(socket);
  }

  /** For `dns.Resolver#setServers`: `127.0.0.1:PORT`. */
  get server(): string {
    return `127.0.0.1:${this.socket.address().port}`;
  }

  close(): void {
    this.socket.close();
  }
}

/** The first question's name of a DNS message (RFC 1035 §4.1): labels after the 12-byte header. */
function questionName(packet: Buffer): string | null {
  const labels: string[] = [];
  let offset = 12;
  while (offset < packet.length) {
    const length = packet[offset] ?? 0;
    if (length === 0) return labels.join('.').toLowerCase();
    if (length > 63) return null;
    labels.push(packet.subarray(offset + 1, offset + 1 + length).toString('latin1'));
    offset += 1 + length;
  }
  return null;
}
