/**
 * A mistake the user can fix (bad config, flag, folder): shown as its message alone, never with
 * a stack trace. The CLI exits with code 2 for it.
 */
export class UserError extends Error {
  override name = 'UserError';
}
