import type { Kysely } from 'kysely';
import { createTransport, type Transporter } from 'nodemailer';
import { apiKeyRepository } from '../db/repositories/api-keys.ts';
import { mailNoticeRepository } from '../db/repositories/mail-notices.ts';
import { userRepository } from '../db/repositories/users.ts';
import type { Database } from '../db/schema.ts';
import { webhookRepository } from '../db/repositories/webhooks.ts';
import { endpointPath, keyPath } from '../paths.ts';

/** How long an endpoint fails before its Super Admins are told (and the panel shows a banner). */
export const FAILING_NOTICE_MS = 3_600_000;
const DAY_MS = 86_400_000;
/** The warnings before a key expires, the nearest first. */
const KEY_THRESHOLDS = [
  { name: '1d', ms: DAY_MS, words: '1 day' },
  { name: '7d', ms: 7 * DAY_MS, words: '7 days' },
] as const;
/** How often each instance looks for keys crossing a threshold: a warning is at most this late. */
export const KEY_SCAN_MS = 15 * 60_000;
/** Each step of an SMTP exchange: connecting, the greeting, any silence after. */
const SMTP_TIMEOUT_MS = 5_000;

export interface MailSettings {
  smtpUrl: string;
  from: string;
  /** The public origin the links in mails start with. */
  baseUrl: string;
}

interface MailLogger {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
}

/** An endpoint as a mail names it. */
export type NoticedEndpoint = { id: string; account_id: string; url: string };

interface Mail {
  subject: string;
  text: string;
}

/**
 * An endpoint named without its query string, which may carry a receiver's token: mails never
 * hold a secret.
 */
export function endpointName(url: string): string {
  const parsed = URL.parse(url);
  return parsed === null ? '(an unreadable URL)' : `${parsed.origin}${parsed.pathname}`;
}

/** An endpoint the admin panel's banner names, until it recovers (or is enabled again). */
export interface EndpointAlert {
  id: string;
  name: string;
  /** `disabled`, or `failing` since `since` (an hour or more). */
  problem: 'disabled' | 'failing';
  since: string | null;
}

/** The account's endpoints disabled, or failing for FAILING_NOTICE_MS by `now`: what the banner shows. */
export async function endpointAlerts(
  db: Kysely<Database>,
  accountId: string,
  now: Date,
): Promise<EndpointAlert[]> {
  const failingBefore = new Date(now.getTime() - FAILING_NOTICE_MS).toISOString();
  const rows = await webhookRepository.troubledByAccount(db, accountId, failingBefore);
  return rows.map((row) => ({
    id: row.id,
    name: endpointName(row.url),
    problem: row.state === 'disabled' ? 'disabled' : 'failing',
    since: row.state === 'disabled' ? null : row.failing_since,
  }));
}

/**
 * Mail to an account's Super Admins (docs/operations.md, "Mail"): an endpoint failing for an hour,
 * an endpoint disabled, a key expiring in 7 days and in 1 day. Each event is claimed in the store
 * under a key of its own before its mail leaves (`mail_notices`), so that it is told once however
 * many instances see it; a mail the SMTP server refused gives its claim back for a later occasion.
 */
export class MailService {
  private readonly db: Kysely<Database>;
  private readonly settings: MailSettings;
  private readonly logger: MailLogger;
  private readonly transport: Transporter;
  /** Mails on their way: the worker that saw the event does not wait for SMTP. */
  private readonly pending = new Set<Promise<unknown>>();
  private timer: NodeJS.Timeout | null = null;

  constructor(db: Kysely<Database>, settings: MailSettings, logger: MailLogger) {
    this.db = db;
    this.settings = settings;
    this.logger = logger;
    // Nodemailer waits minutes by default; a stalled SMTP server must not hold a shutdown that long.
    // The URL's own parameters (`?socketTimeout=…`) still win.
    this.transport = createTransport({
      url: settings.smtpUrl,
      connectionTimeout: SMTP_TIMEOUT_MS,
      greetingTimeout: SMTP_TIMEOUT_MS,
      socketTimeout: SMTP_TIMEOUT_MS,
    });
  }

  /** After a failed attempt at `at`: once the endpoint has failed for an hour, told once for the episode. */
  endpointFailing(endpoint: NoticedEndpoint, failingSince: string, at: Date): void {
    if (at.getTime() - Date.parse(failingSince) < FAILING_NOTICE_MS) return;
    const name = endpointName(endpoint.url);
    this.track(
      this.tell(`webhook-failing:${endpoint.id}:${failingSince}`, endpoint.account_id, {
        subject: `Webhook endpoint failing: ${name}`,
        text: [
          `Every delivery to the webhook endpoint ${name} has failed since ${failingSince}.`,
          'Deliveries are retried with backoff; an endpoint that keeps failing is disabled.',
          '',
          `The endpoint and its delivery log: ${this.link(endpointPath(endpoint.id))}`,
        ].join('\n'),
      }),
    );
  }

  /** The delivery disabled the endpoint at `stamp` (the time it wrote): told once. */
  endpointDisabled(endpoint: NoticedEndpoint, reason: string, stamp: string): void {
    const name = endpointName(endpoint.url);
    this.track(
      this.tell(`webhook-disabled:${endpoint.id}:${stamp}`, endpoint.account_id, {
        subject: `Webhook endpoint disabled: ${name}`,
        text: [
          `The webhook endpoint ${name} was disabled at ${stamp}: ${reason}.`,
          'It receives nothing until it is enabled again; it then goes on from where it stopped.',
          '',
          `The endpoint and its delivery log: ${this.link(endpointPath(endpoint.id))}`,
        ].join('\n'),
      }),
    );
  }

  /** Warns of every key whose expiry crossed a threshold by `now`, once per key and threshold. */
  async checkKeyExpiry(now: Date): Promise<void> {
    const horizon = new Date(now.getTime() + (KEY_THRESHOLDS.at(-1)?.ms ?? 0));
    const keys = await apiKeyRepository.expiringBetween(this.db, now.toISOString(), horizon.toISOString());
    for (const key of keys) {
      const expiresAt = key.expires_at as string;
      const left = Date.parse(expiresAt) - now.getTime();
      const threshold = KEY_THRESHOLDS.find(({ ms }) => left <= ms);
      if (threshold === undefined) continue;
      // The expiry is part of the key: a key given a new expiry is warned of again.
      await this.tell(`key-expiring:${key.id}:${threshold.name}:${expiresAt}`, key.account_id, {
        subject: `API key expires in ${threshold.words}: ${key.name}`,
        text: [
          `The API key "${key.name}" (${key.prefix}…) expires at ${expiresAt}.`,
          'Requests made with it are refused from then on: roll it or create another before.',
          '',
          `The key: ${this.link(keyPath(key.id))}`,
        ].join('\n'),
      });
    }
  }

  /** Looks for expiring keys now and every KEY_SCAN_MS. */
  start(): void {
    const scan = () => this.track(this.checkKeyExpiry(new Date()));
    scan();
    this.timer = setInterval(scan, KEY_SCAN_MS).unref();
  }

  /** Resolves when every mail on its way has left or failed. */
  async idle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending);
  }

  async close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    await this.idle();
    this.transport.close();
  }

  private link(path: string): string {
    return `${this.settings.baseUrl}${path}`;
  }

  private track(work: Promise<unknown>): void {
    const guarded = work
      .catch((error: unknown) =>
        this.logger.warn({ err: error }, 'mail to Super Admins not sent: the store failed'),
      )
      .finally(() => this.pending.delete(guarded));
    this.pending.add(guarded);
  }

  /** Claims `key` and sends `mail` to the account's Super Admins; nothing if another claimed it. */
  private async tell(key: string, accountId: string, mail: Mail): Promise<void> {
    const to = await this.db.transaction().execute(async (trx) => {
      const claimed = await mailNoticeRepository.claim(trx, {
        key,
        account_id: accountId,
        created_at: new Date().toISOString(),
      });
      return claimed ? userRepository.superAdminEmails(trx, accountId) : null;
    });
    if (to === null) return;
    if (to.length === 0) {
      this.logger.warn({ notice: key, account: accountId }, 'no active Super Admin to mail');
      return;
    }
    try {
      await this.transport.sendMail({ from: this.settings.from, to, ...mail });
    } catch (error) {
      await mailNoticeRepository.release(this.db, key);
      // The SMTP server's answer, never the URL with its password.
      this.logger.warn(
        { notice: key, account: accountId, err: { message: (error as Error).message } },
        'mail to Super Admins not sent: tried again at the next occasion',
      );
      return;
    }
    this.logger.info({ notice: key, account: accountId, recipients: to.length }, 'mail sent to Super Admins');
  }
}
