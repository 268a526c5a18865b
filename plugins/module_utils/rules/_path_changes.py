# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Whether a copy/template/file task would change a path, judged from the path's gathered state
(``ansible_facts.nodeprep_files``): the plans read it.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._node_records import SHA1_MAX_BYTES


# ---------------------------------------------------------------- decisions on the controller

def path_change(state, want):
    """Why a copy/template/file task for ``want`` would change the path whose gathered state is ``state``.

    ``want``: {path, state: 'file'|'directory'|'link'|'absent', sha1 (file content), mode ('0644'), uid, gid, src
    (link target)}; uid and gid default to 0 (root), mode is not compared when missing.  ``state`` is the entry of
    ``nodeprep_files`` (None when the path was not gathered).  Returns None when nothing would change, else a short
    reason.  What cannot be told from the facts (not gathered, no SHA-1 because the file is over 1 MiB or unreadable)
    is a change: the task then runs and decides itself.
    """
    path = want.get('path')
    kind = want.get('state', 'file')
    if not isinstance(state, dict) or 'exists' not in state:
        return '{0}: not gathered'.format(path)
    if kind == 'absent':
        return '{0}: exists'.format(path) if state['exists'] else None
    if not state['exists']:
        return '{0}: missing'.format(path)
    if state.get('type') != kind:
        return '{0}: is a {1}, not a {2}'.format(path, state.get('type'), kind)
    if kind == 'link':
        if state.get('target') != want.get('src'):
            return '{0}: points to {1}, not {2}'.format(path, state.get('target'), want.get('src'))
        return None
    if kind == 'file':
        if state.get('sha1') is None:
            return '{0}: content not known (over {1} bytes or unreadable)'.format(path, SHA1_MAX_BYTES)
        if state['sha1'] != want.get('sha1'):
            return '{0}: content differs'.format(path)
    if want.get('mode') is not None and state.get('mode') != want['mode']:
        return '{0}: mode {1}, not {2}'.format(path, state.get('mode'), want['mode'])
    for key in ('uid', 'gid'):
        if state.get(key) != want.get(key, 0):
            return '{0}: {1} {2}, not {3}'.format(path, key, state.get(key), want.get(key, 0))
    return None
