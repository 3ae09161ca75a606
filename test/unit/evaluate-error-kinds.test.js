// The load generator's error classifier, on RethinkDB 2.4.4's exact error texts (recorded, and from its source).

import { classifyError, errorMessage } from '../../bench/evaluate/load-generator.js';
import { loadRethinkFixture } from '../helpers/fixtures.js';

// The driver's errors carry the server's text in msg and append the query in message.
const driverError = (name, msg) => Object.assign(new Error(`${msg} in:\nr.db("ycsb").table("usertable").get("user1")`), { name, msg });

describe('classifyError on recorded errors (07: two of three replicas killed)', () => {
  const recorded = loadRethinkFixture('07-two-servers-killed-ops.json');
  const failures = [...recorded.writes, ...recorded.reads].filter((op) => op.error);

  test('when the fixture is read, then it holds both quorum and shard-unavailable failures', () => {
    const messages = new Set(failures.map((op) => op.error.message));
    expect(messages.size).toBeGreaterThanOrEqual(3);
  });

  test.each([
    ['Cannot perform write: The primary replica isn\'t connected to a quorum of replicas. The write was not performed.', 'no-quorum'],
    ['Cannot perform read: The primary replica isn\'t connected to a quorum of replicas. The read was not performed, you can do an outdated read using `read_mode="outdated"`.', 'no-quorum'],
    ['Cannot perform write: primary replica for shard ["Suser55\\x1C7\\xE8", "Suser77\\x12\\xBBd") not available', 'primary-unavailable'],
  ])('when the error is %j, then it is %s', (message, kind) => {
    expect(failures.some((op) => op.error.message === message)).toBe(true);
    expect(classifyError(driverError('ReqlOpFailedError', message))).toBe(kind);
    expect(classifyError(message)).toBe(kind);
  });

  test('when every recorded failure is classified, then none is "other"', () => {
    expect(failures.map((op) => classifyError(op.error)).filter((kind) => kind === 'other')).toEqual([]);
  });
});

describe('classifyError on the texts in RethinkDB 2.4.4\'s source and the 2.4 driver', () => {
  test.each([
    // src/clustering/table_contract/executor/exec_primary.cc
    ['Cannot perform write: The primary replica is currently changing from one replica to another. The write was not performed. This error should go away in a couple of seconds.', 'primary-changing'],
    ['Cannot perform read: The primary replica is currently changing from one replica to another. The read could not be guaranteed as committed. This error should go away in a couple of seconds.', 'primary-changing'],
    ['Cannot perform write: The primary replica lost contact with the secondary replicas. The write may or may not have been performed.', 'lost-contact'],
    // src/clustering/query_routing/table_query_client.cc
    ['Cannot perform read: lost contact with primary replica', 'lost-contact'],
    ['Cannot perform read: primary replica for shard ["", "Suser3") not available', 'primary-unavailable'],
    // seen here from a single server just restarted after SIGKILL
    ['Cannot perform write: primary replica for shard ["", +inf) not available', 'primary-unavailable'],
    ['Cannot perform read: cannot compute sharding scheme because primary replicas are unavailable or duplicated', 'primary-unavailable'],
    ['Cannot perform read: Failed to retrieve the table configuration', 'table-unavailable'],
    ['Cannot perform read: no replica is available', 'table-unavailable'],
    // src/clustering/immediate_consistency/primary_dispatcher.cc
    ['Cannot perform read: No replicas are ready for reading.', 'table-unavailable'],
    // rethinkdb 2.4 driver (net.js) and Node sockets
    ['Connection is closed.', 'connection'],
    ['Could not connect to 127.0.0.1:28015.\nconnect ECONNREFUSED 127.0.0.1:28015', 'connection'],
    ['Could not connect to 127.0.0.1:28015, operation timed out.', 'connection'],
    ['read ECONNRESET', 'connection'],
    ['Table `ycsb.usertable` does not exist.', 'other'],
    ['something nobody expected', 'other'],
  ])('when the error is %j, then it is %s', (message, kind) => {
    expect(classifyError(driverError('ReqlOpFailedError', message))).toBe(kind);
  });

  test('when the error has no message, then it is "other" and its text is its string form', () => {
    expect(classifyError(undefined)).toBe('other');
    expect(errorMessage(42)).toBe('42');
  });

  test('when the driver error carries msg, then the example text is msg without the query', () => {
    expect(errorMessage(driverError('ReqlOpFailedError', 'Connection is closed.'))).toBe('Connection is closed.');
  });
});
