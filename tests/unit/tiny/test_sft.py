"""memjax.tiny.sft: the rows every tiny warm start trains on."""

import numpy as np

from memjax.tiny.sft import sft_rows


def test_sft_rows_place_prompt_and_response_and_mask_only_the_response():
    rows = [([5, 6, 7], [8, 9]), ([1], [2, 3, 4]), ([], [])]
    ids, mask = sft_rows(rows, pad_id=0, width=6)
    assert ids.dtype == np.int32 and mask.dtype == np.float32 and ids.shape == mask.shape == (3, 6)
    np.testing.assert_array_equal(ids, [[5, 6, 7, 8, 9, 0], [1, 2, 3, 4, 0, 0], [0] * 6])
    np.testing.assert_array_equal(mask, [[0, 0, 0, 1, 1, 0], [0, 1, 1, 1, 0, 0], [0] * 6])

