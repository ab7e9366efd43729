import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface Smtp {
  url: string;
  received: Received[];
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
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
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
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
