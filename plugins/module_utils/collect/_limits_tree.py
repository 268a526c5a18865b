# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""What limits_facts reads besides collect/_limits.py, and gpu_node_facts never does (so the gather does not ship it):
the accounts of a tree (its ``root`` option: the tree's etc/passwd and etc/group), and its ``groups`` option, which
stands in for the account databases.  No Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _limits


def _tree_accounts(root):
    """<root>/etc/passwd and <root>/etc/group: ({name: (uid, gid)}, [(group, gid, members)])."""
    passwd_db, group_db = {}, []
    for rel in ('etc/passwd', 'etc/group'):
        for line in (_limits.read_file(os.path.join(root, rel))['text'] or '').splitlines():
            fields = line.split(':')
            if len(fields) < 4 or not fields[2].isdigit():
                continue
            if rel == 'etc/passwd' and fields[3].isdigit():
                passwd_db[fields[0]] = (int(fields[2]), int(fields[3]))
            elif rel == 'etc/group':
                group_db.append((fields[0], int(fields[2]), [m for m in fields[3].split(',') if m]))
    return passwd_db, group_db


def read_account(name, root='/', override=None):
    """{'uid', 'gid', 'groups', 'gids'} of a user from pwd/grp (root '/') or the tree's files, with ``override``
    ({'groups', 'uid', 'gid'}, limits_facts' groups option) in place of the databases; None for an unknown user.
    ANY_USER is an account no line names: no uid, no group."""
    if name == _limits.ANY_USER:
        return _limits.account(name, None, [])
    if root in ('/', ''):
        known, groups = _limits.passwd_entry(name), _limits.group_db()
    else:
        passwd_db, groups = _tree_accounts(root)
        known = passwd_db.get(name)
    if override is None:
        return _limits.account(name, known, groups)
    uid = override['uid'] if override['uid'] is not None else (known[0] if known else None)
    gid = override['gid'] if override['gid'] is not None else (known[1] if known else None)
    gids = set(g[1] for g in groups if g[0] in override['groups']) | (set() if gid is None else set([gid]))
    return {'uid': uid, 'gid': gid, 'groups': sorted(set(override['groups'])), 'gids': sorted(gids)}


def read_limits(module, users=(), services=(), root='/', groups=None):
    """collect/_limits.read_limits with the accounts of ``root`` and limits_facts' checked ``groups`` option
    ({user: {groups, uid, gid}})."""
    root = root or '/'
    return _limits.read_limits(module, users, services, root,
                               read_user=lambda name: read_account(name, root, (groups or {}).get(name)))
