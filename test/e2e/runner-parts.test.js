// Which long-lived parts a replica runs (src/lib/runner.js), as GET /v1/leader and /v1/cluster say it: the node watch
// only once the replica leads, the timers once it has started, and nothing before.

import request from 'supertest';
import { createSandboxHarness } from '../helpers/harness.js';

describe('the runner\'s parts in the leader view', () => {
  test('when the manager has not started, then it runs nothing; once it leads, the work queue and the node watch; once started, the timers too; after shutdown, nothing', async () => {
    const h = createSandboxHarness();
    const parts = async () => (await request(h.app).get('/v1/leader')).body.parts;
    expect(await parts()).toEqual([]);
    await h.lead();
    expect(await parts()).toEqual(['work-queue', 'node-watch']);
    expect((await request(h.app).get('/v1/cluster')).body.leadership.parts).toEqual(['work-queue', 'node-watch']);
    await h.start();
    expect(await parts()).toEqual(['work-queue', 'node-watch', 'timers']);
    await h.shutdown();
    expect(h.running()).toEqual([]);
  });

  test('when node watching is off, then a replica that leads runs no node watch', async () => {
    const h = createSandboxHarness({ env: { NODE_WATCH_ENABLED: 'false' } });
    await h.lead();
    expect((await request(h.app).get('/v1/leader')).body.parts).toEqual(['work-queue']);
  });
});
