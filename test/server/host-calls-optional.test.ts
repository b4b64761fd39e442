import { describe, expect, it } from 'vitest';
import { parseHostCall } from '../../server/services/host-calls';

// The optional fields of a host call stay optional (server/services/host-calls.ts): a GET through an
// integration has no body, and both agent examples make one.
describe('host-call arguments: optional fields', () => {
  it('integrations.call without a body, query or headers is accepted', () => {
    expect(parseHostCall('integrations.call', { name: 'weather', method: 'GET', path: '/weather' })).toEqual({
      name: 'weather',
      method: 'GET',
      path: '/weather',
    });
  });
  it('store.list without a prefix and store.set without a TTL are accepted', () => {
    expect(parseHostCall('store.list', {})).toEqual({});
    expect(parseHostCall('store.set', { key: 'k', value: 1 })).toMatchObject({ key: 'k', value: 1 });
  });
});
