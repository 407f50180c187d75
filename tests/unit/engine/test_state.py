"""memjax.engine.state: the page pool's reference counting and free stack."""

import jax.numpy as jnp
import numpy as np

from memjax.engine.config import EngineConfig
from memjax.engine.state import init_pool, pop_pages, release_pages, stack_page
from memjax.model import presets


def test_pop_and_release_with_shared_pages():
    pool = init_pool(presets.get("tiny"), EngineConfig(window=32, page_size=4), num_pages=12)
    assert int(pool.n_free) == 11 and 0 not in np.asarray(pool.free_stack[:11]).tolist()
    want = jnp.asarray([3, 2], jnp.int32)
    after, off = pop_pages(pool, want)
    a = [int(stack_page(pool, off[0] + i)) for i in range(3)]
    b = [int(stack_page(pool, off[1] + i)) for i in range(2)]
    assert len(set(a + b)) == 5 and int(after.n_free) == 6
    # slot 0 holds a; slot 1 holds b plus a shared copy of a[0]
    rc = after.refcount.at[jnp.asarray(a + b)].add(1).at[a[0]].add(1)
    pt = jnp.asarray([a + [0], b + [a[0], 0]], jnp.int32)
    pool2 = release_pages(after.replace(refcount=rc), pt, jnp.asarray([3, 3]), jnp.asarray([True, False]))
    assert int(pool2.n_free) == 8 and int(pool2.refcount[a[0]]) == 1  # a[0] still held by slot 1
    freed = set(np.asarray(pool2.free_stack[6:8]).tolist())
    assert freed == {a[1], a[2]}
    pool3 = release_pages(pool2, pt, jnp.asarray([3, 3]), jnp.asarray([False, True]))
    assert int(pool3.n_free) == 11 and int(pool3.refcount.sum()) == 0
    assert sorted(np.asarray(pool3.free_stack[:11]).tolist()) == list(range(1, 12))
