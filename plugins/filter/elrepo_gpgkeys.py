# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_kernel


def elrepo_gpgkeys(major, base='', keys=None):
    """ELRepo's signing keys for an EL major version (the kernel role's rule, _plan_kernel.elrepo_gpgkeys)."""
    try:
        return _plan_kernel.elrepo_gpgkeys(major, keys=keys, base=base)
    except ValueError as exc:
        raise AnsibleFilterError('elrepo_gpgkeys: {0}'.format(exc))


class FilterModule(object):
    def filters(self):
        return {'elrepo_gpgkeys': elrepo_gpgkeys}
