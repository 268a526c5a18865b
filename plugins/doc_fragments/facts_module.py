# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type


class ModuleDocFragment(object):
    """Documentation shared by the facts modules of gpufleet.nodeprep (they read, never change, the host)."""

    # The support of every facts module's attributes, and its notes. The descriptions of the attributes have one
    # home, the attributes fragment: extend gpufleet.nodeprep.attributes, gpufleet.nodeprep.attributes.FACTS and
    # gpufleet.nodeprep.facts_module (not attributes.INFO_MODULE, whose diff_mode support is N/A).
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: none
    details:
      - This action does not modify state.
  facts:
    support: full
notes:
  - Returns only C(ansible_facts) and C(changed=false). Files or lines that could not be read are listed in the
    namespace's C(errors) (where it has one) and repeated as warnings; a check must treat a non-empty C(errors) as
    "state unknown", never as a pass.
"""

    # The root option of the readers that can read a tree instead of the running host.
    ROOT = r"""
options:
  root:
    description:
      - Read the host's files below this directory instead of C(/) (a mounted image, a container's root, a test
        tree). Commands that ask the running system are not run for another root.
    type: path
    default: /
"""
