// voice page: not written yet
