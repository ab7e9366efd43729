import type { Kysely } from 'kysely';
import type { Database } from '../schema.ts';
import { repository } from '../store-context.ts';

export const generatedSecretRepository = repository('generatedSecretRepository', {
  async find(db: Kysely<Database>, kind: string): Promise<string | undefined> {
    const row = await db
      .selectFrom('generated_secrets')
      .select('value')
      .where('kind', '=', kind)
      .executeTakeFirst();
    return row?.value;
  },

  /** Stores `value` unless a value of that kind exists; returns the stored one either way. */
  async insertOnce(db: Kysely<Database>, kind: string, value: string, now: string): Promise<string> {
    await db
      .insertInto('generated_secrets')
      .values({ kind, value, created_at: now })
      .onConflict((oc) => oc.column('kind').doNothing())
      .execute();
    const stored = await generatedSecretRepository.find(db, kind);
    if (stored === undefined) throw new Error(`generated secret "${kind}" vanished right after being stored`);
    return stored;
  },
});
