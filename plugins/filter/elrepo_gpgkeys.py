# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._driver_plan import ELREPO_KEYS, elrepo_keys


def elrepo_gpgkeys(major, base='', keys=None):
    """ELRepo's signing keys for an EL major version (EL10: the v2 key only), optionally below another base URL.

    With ``keys`` (URLs given by the user), keep those, dropping any ELRepo key file this release must not list.
    """
    major = str(major)
    if major not in ELREPO_KEYS:
        raise AnsibleFilterError('elrepo_gpgkeys: EL major version {0!r} is not one ELRepo publishes for; allowed: {1}'
                                 .format(major, ', '.join(sorted(ELREPO_KEYS, key=int))))
    wanted = elrepo_keys(major)
    if keys:
        if not isinstance(keys, list):
            keys = [keys]
        names = [k.rsplit('/', 1)[-1] for k in wanted]
        known = [k.rsplit('/', 1)[-1] for release in ELREPO_KEYS.values() for k in release]
        return [k for k in keys if k.rsplit('/', 1)[-1] in names or k.rsplit('/', 1)[-1] not in known]
    if base:
        wanted = [base.rstrip('/') + '/' + key.rsplit('/', 1)[1] for key in wanted]
    return wanted


class FilterModule(object):
    def filters(self):
        return {'elrepo_gpgkeys': elrepo_gpgkeys}
