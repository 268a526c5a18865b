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
WHEELS = sorted(glob.glob(os.path.join(HERE, 'pip-*-py3-none-any.whl')))
if not WHEELS:
    sys.exit('get-pip stand-in: no pip wheel next to %s' % __file__)
sys.path.insert(0, WHEELS[-1])

from pip._internal.cli.main import main  # noqa: E402  pylint: disable=wrong-import-position

ARGS = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
sys.exit(main(['install', '--disable-pip-version-check'] + ARGS))
