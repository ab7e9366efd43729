import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface Smtp {
  url: string;
  received: Received[];
  /** Messages refused so far (`refuse`). */
  readonly refused: number;
  /** Refuses the next `count` messages with a temporary failure (451), as a busy server does. */
  refuse(count: number): void;
  close(): Promise<void>;
}

export interface Received {
  to: string[];
  subject: string;
  /** The whole message, quoted-printable soft breaks and escapes undone. */
  text: string;
}

/** A local SMTP server that keeps every message it is given. */
export async function startSmtp(): Promise<Smtp> {
  const received: Received[] = [];
  let toRefuse = 0;
  let refused = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        if (toRefuse > 0) {
          toRefuse -= 1;
          refused += 1;
          callback(Object.assign(new Error('mailbox busy, try again later'), { responseCode: 451 }));
          return;
        }
        const text = Buffer.concat(chunks)
          .toString('utf8')
          .replace(/=\r?\n/g, '')
          .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
        received.push({
          to: session.envelope.rcptTo.map((rcpt) => rcpt.address).sort(),
          subject: /^Subject: (.*)$/m.exec(text)?.[1] ?? '',
          text,
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    get refused() {
      return refused;
    },
    refuse(count) {
      toRefuse = count;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
