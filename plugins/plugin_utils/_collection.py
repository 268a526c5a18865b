# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
#
# Where this collection's roles are on the controller, for controller plugins that read a role's files wherever the
# task that needs them is (playbooks/site.yml decides for every role in its first play, outside the roles).

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

# plugins/plugin_utils/ -> the collection's roles/.
ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'roles')


def role_file(term, roles_dir=ROLES_DIR):
    """Absolute path of ``term`` (``<role>/<path in the role>``) in the collection's roles; ValueError when the term
    leaves the roles directory or names no file."""
    if not term or os.path.isabs(term):
        raise ValueError('{0!r} is not <role>/<path in the role>'.format(term))
    base = os.path.realpath(roles_dir)
    path = os.path.realpath(os.path.join(base, term))
    if not path.startswith(base + os.sep) or os.sep not in path[len(base) + 1:]:
        raise ValueError('{0!r} is not <role>/<path in the role>'.format(term))
    if not os.path.isfile(path):
        roles = sorted(name for name in os.listdir(base) if os.path.isdir(os.path.join(base, name))) \
            if os.path.isdir(base) else []
        raise ValueError('{0} names no file in the roles of gpufleet.nodeprep ({1}); roles: {2}'.format(
            term, base, ', '.join(roles) or 'none'))
    return path
