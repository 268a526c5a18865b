# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Make ``ansible_collections.gpufleet.nodeprep`` importable from a plain clone, and register the markers.

The repository root *is* the collection.  Unit tests import plugins (and tests/unit/nodeprep_harness.py) by their
fully qualified name.  Under ``ansible-test units`` the checkout already lies in ansible_collections/gpufleet/nodeprep
and nothing is linked.  Under plain pytest we lay out ``ansible_collections/gpufleet/nodeprep`` as a symlink to this
checkout in a scratch folder outside the tree (a link inside the tree would loop for every tool that walks it), named
after this checkout's path, and put that folder first on ``sys.path``.  Only that folder is used: the helpers never
look for other ``nodeprep-pytest-*`` folders, and the session stops when the collection imports from anywhere else.

Nothing imports this file: use tests/unit/nodeprep_harness.py.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import hashlib
import os
import sys
import tempfile

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

# Markers the tests use; registered here too because ansible-test units runs pytest with its own configuration.
MARKERS = (
    'netns: needs root and `ip netns` (creates its own namespace and veth pair)',
    'mountns: needs root and `unshare` (mounts a tmpfs in a private mount namespace)',
)


def _laid_out(root):
    """The collections folder when root already is <folder>/ansible_collections/gpufleet/nodeprep, else None."""
    parts = root.split(os.sep)
    if parts[-3:] == ['ansible_collections', 'gpufleet', 'nodeprep']:
        return os.sep.join(parts[:-3]) or os.sep
    return None


def _collection_root(root=_ROOT):
    """A folder whose ansible_collections/gpufleet/nodeprep is this checkout (made or repaired here)."""
    laid_out = _laid_out(root)
    if laid_out is not None:
        return laid_out
    tag = hashlib.sha1(root.encode('utf-8')).hexdigest()[:12]
    base = os.path.join(tempfile.gettempdir(), 'nodeprep-pytest-' + tag)
    link = os.path.join(base, 'ansible_collections', 'gpufleet', 'nodeprep')
    if not os.path.islink(link) or os.path.realpath(link) != root:
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(root, link)
    return base


_BASE = _collection_root()
if _BASE in sys.path:
    sys.path.remove(_BASE)
sys.path.insert(0, _BASE)


def pytest_configure(config):
    for marker in MARKERS:
        config.addinivalue_line('markers', marker)
    if _laid_out(_ROOT) is not None:
        return  # ansible-test units: the collection is where ansible-test put it
    from ansible_collections.gpufleet.nodeprep import plugins
    found = [os.path.realpath(p) for p in plugins.__path__]
    if found != [os.path.join(_ROOT, 'plugins')]:
        raise RuntimeError('ansible_collections.gpufleet.nodeprep.plugins imports from {0}, not from this checkout '
                           '({1}): remove the other copy from sys.path'.format(found, _ROOT))
