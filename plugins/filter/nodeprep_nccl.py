# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""``nodeprep_nccl_plan``: what the gpufleet.nodeprep.nccl role writes and refuses, from the one set of NCCL rules
in plugins/module_utils/_nccl.py (which the readiness check nccl.config uses as well)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._nccl import NcclError, plan


def nodeprep_nccl_plan(conf, torch_env=None, extra_names=None, socket_ifnames=None):
    """``{conf_content, torch_env, problems, errors}`` for the nccl role (see _nccl.plan)."""
    try:
        return plan(conf, torch_env=torch_env, extra_names=extra_names or [], socket_ifnames=socket_ifnames)
    except NcclError as exc:
        raise AnsibleFilterError('nodeprep_nccl_plan: {0}'.format(exc))


class FilterModule(object):
    """gpufleet.nodeprep NCCL filters."""

    def filters(self):
        return {'nodeprep_nccl_plan': nodeprep_nccl_plan}
