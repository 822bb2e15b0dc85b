"""Images: a content-addressed attachment store, the ``read_image`` tool and image blocks in model requests."""
