# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for the get-pip.py bootstrap script that ansible-test downloads.

ansible-test fetches get-pip.py from a host our machines cannot reach.  It only needs
the script to behave like ``pip install ARGS`` inside a fresh virtual environment, so
this file runs pip from the pip wheel saved next to it (fetched from PyPI by
``make sanity``).  get-pip.py's own flags (``--no-setuptools``, ``--no-wheel``) are
dropped: they mean "do not add those packages", which plain pip never does anyway.
"""
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Saved as get_pip_<version>.py (for example get_pip_24_3_1.py): use the wheel of that pip version. Several ansible-core
# releases (make sanity-matrix) keep their stand-ins and wheels side by side in the same cache.
VERSION = os.path.splitext(os.path.basename(__file__))[0][len('get_pip_'):].replace('_', '.')
WHEELS = glob.glob(os.path.join(HERE, 'pip-%s-py3-none-any.whl' % VERSION))
if not WHEELS:
    sys.exit('get-pip stand-in: no pip-%s wheel next to %s' % (VERSION, __file__))
sys.path.insert(0, WHEELS[0])

from pip._internal.cli.main import main  # noqa: E402  pylint: disable=wrong-import-position

ARGS = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
sys.exit(main(['install', '--disable-pip-version-check'] + ARGS))
