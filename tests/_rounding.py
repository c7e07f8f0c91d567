"""to_dict()'s rounding, as the tests state it (the released module's, issue 12)."""
import math


def released_round(x, decimals=2):
    """The released rounding (ms and MiB to 2 decimals, fps to 1), widened to keep 2
    significant digits."""
    if x == 0 or not math.isfinite(x):
        return round(x, decimals)
    return round(x, max(decimals, 1 - math.floor(math.log10(abs(x)))))
