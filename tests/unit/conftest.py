# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Make ``ansible_collections.gpufleet.nodeprep`` importable from a plain clone.

The repository root *is* the collection.  Unit tests import plugins by their fully
qualified name, so we lay out ``ansible_collections/gpufleet/nodeprep`` as a symlink
to the repository in a scratch folder outside the tree (a link inside the tree would
loop for every tool that walks it) and put that folder on ``sys.path``.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import hashlib
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures')


def _collection_root():
    tag = hashlib.sha1(ROOT.encode('utf-8')).hexdigest()[:12]
    base = os.path.join(tempfile.gettempdir(), 'nodeprep-pytest-' + tag)
    link = os.path.join(base, 'ansible_collections', 'gpufleet', 'nodeprep')
    if not os.path.islink(link) or os.path.realpath(link) != ROOT:
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(ROOT, link)
    return base


sys.path.insert(0, _collection_root())
